package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	"golang.org/x/sys/windows"
)

// The Windows suite runs against the daemon the way it is deployed: the
// sandboxd service, installed by `sandboxd install`, running as LocalSystem
// (only a service holds the privileges CreateProcessAsUser needs), on the
// default pipe. It must run elevated, as the GitHub Actions Windows runner
// does, and it uninstalls what it installed at the end.
var winSuite struct {
	root                        string
	sandboxd, sandboxctl, probe string
	client                      *client.Client
}

func TestMain(m *testing.M) {
	code, err := runWindowsSuite(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func runWindowsSuite(m *testing.M) (int, error) {
	if !windows.GetCurrentProcessToken().IsElevated() {
		return 1, fmt.Errorf("the Windows suite installs the sandboxd service and its sandbox users: run it elevated")
	}
	// Below the system drive's root, where new directories inherit read and
	// execute for Users: the sandbox users must be able to run the probe,
	// while a user profile's directories are its owner's alone.
	drive := os.Getenv("SystemDrive")
	if drive == "" {
		drive = "C:"
	}
	root, err := os.MkdirTemp(drive+`\`, "sbd-conf-")
	if err != nil {
		return 1, err
	}
	winSuite.root = root
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return 1, err
	}
	if err := buildWindowsBinaries(bin); err != nil {
		return 1, err
	}
	if out, err := exec.Command(winSuite.sandboxd, "install").CombinedOutput(); err != nil {
		return 1, fmt.Errorf("sandboxd install: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command(winSuite.sandboxd, "uninstall").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: sandboxd uninstall: %v\n%s", err, out)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		winSuite.client, err = client.Dial(ctx, "")
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return 1, fmt.Errorf("the sandboxd service did not answer on its pipe: %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	defer winSuite.client.Close()
	return m.Run(), nil
}

func buildWindowsBinaries(bin string) error {
	winSuite.sandboxd = filepath.Join(bin, "sandboxd.exe")
	winSuite.sandboxctl = filepath.Join(bin, "sandboxctl.exe")
	winSuite.probe = filepath.Join(bin, "probe.exe")
	for out, pkg := range map[string]string{
		winSuite.sandboxd:   "github.com/sandboxd/sandboxd/cmd/sandboxd",
		winSuite.sandboxctl: "github.com/sandboxd/sandboxd/cmd/sandboxctl",
		winSuite.probe:      "github.com/sandboxd/sandboxd/internal/conformance/probe",
	} {
		cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
}

// parseOutcomes reads the probe's JSON lines; a console turns "\n" into
// "\r\n" and may add escape sequences of its own before a line.
func parseOutcomes(out string) []outcome {
	var list []outcome
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "{")
		if i < 0 {
			continue
		}
		var o outcome
		if json.Unmarshal([]byte(strings.TrimSpace(line[i:])), &o) == nil {
			list = append(list, o)
		}
	}
	return list
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fixture is a directory of its own per case, below the suite's root.
type fixture struct {
	t   *testing.T
	dir string
}

func newFixture(t *testing.T) *fixture {
	dir, err := os.MkdirTemp(winSuite.root, "case-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &fixture{t: t, dir: dir}
}

func (f *fixture) path(rel string) string { return filepath.Join(f.dir, filepath.FromSlash(rel)) }

func (f *fixture) mkdir(rel string) string {
	p := f.path(rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) file(rel, content string) string {
	p := f.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func unchanged(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if string(b) != want {
		t.Errorf("%s changed: %q, want %q", path, b, want)
	}
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists, but the sandbox must not have been able to create it", path)
	}
}

// processAlive reports whether pid names a running process.
func processAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	return err == nil && ev == uint32(windows.WAIT_TIMEOUT)
}
