package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	"golang.org/x/sys/windows"
)

// The Windows suite runs against the daemon the way it is deployed: the
// sandboxd service, installed by `sandboxd install`, running as LocalSystem
// (only a service holds the privileges CreateProcessAsUser needs), on the
// default pipe. It must run elevated, as the GitHub Actions Windows runner
// does, and it uninstalls what it installed at the end. suite.daemon stays
// nil: the service is not a process the suite started.

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
	suite.root = root
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return 1, err
	}
	if err := buildWindowsBinaries(bin); err != nil {
		return 1, err
	}
	if out, err := exec.Command(suite.sandboxd, "install").CombinedOutput(); err != nil {
		return 1, fmt.Errorf("sandboxd install: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command(suite.sandboxd, "uninstall").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: sandboxd uninstall: %v\n%s", err, out)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		suite.client, err = client.Dial(ctx, "")
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return 1, fmt.Errorf("the sandboxd service did not answer on its pipe: %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	defer suite.client.Close()
	suite.caps, err = suite.client.Capabilities(ctx)
	if err != nil {
		return 1, fmt.Errorf("capabilities: %w", err)
	}
	return m.Run(), nil
}

func buildWindowsBinaries(bin string) error {
	suite.sandboxd = filepath.Join(bin, "sandboxd.exe")
	suite.sandboxctl = filepath.Join(bin, "sandboxctl.exe")
	suite.probe = filepath.Join(bin, "probe.exe")
	for out, pkg := range map[string]string{
		suite.sandboxd:   "github.com/sandboxd/sandboxd/cmd/sandboxd",
		suite.sandboxctl: "github.com/sandboxd/sandboxd/cmd/sandboxctl",
		suite.probe:      "github.com/sandboxd/sandboxd/internal/conformance/probe",
	} {
		cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
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

// daemonProcAttr: a daemon the suite starts itself is stopped by tearDown
// and each test's cleanup; Windows has no parent-death signal.
func daemonProcAttr() *syscall.SysProcAttr {
	return nil
}

// denialLag: the Windows backend reports no denials of its own (the shared
// list's observe cases say so), so nothing arrives late.
const denialLag time.Duration = 0
