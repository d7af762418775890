//go:build linux || darwin

package conformance

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if err := setUp(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: set up: %v\n", err)
		tearDown()
		return 1
	}
	code := m.Run()
	if !tearDown() && code == 0 {
		code = 1
	}
	return code
}

func setUp() error {
	suite.asRoot = os.Geteuid() == 0
	suite.uid, suite.gid = os.Getuid(), os.Getgid()
	if suite.asRoot {
		suite.uid, suite.gid = sandboxUID, sandboxUID
	}
	base := os.Getenv("SANDBOXD_CONFORMANCE_DIR")
	if base == "" {
		base = "/var/tmp"
	}
	// Fixture paths must be the ones the sandbox and the daemon report: on
	// macOS /var and /tmp are links into /private.
	base, err := filepath.EvalSymlinks(base)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp(base, "sbd-conf-")
	if err != nil {
		return err
	}
	suite.root = root
	// MkdirTemp makes it 0700; the sandbox identity must be able to reach
	// the probe and the fixtures beneath.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	if err := buildBinaries(bin); err != nil {
		return err
	}
	if err := writeProxyHosts(filepath.Join(root, "proxy-hosts")); err != nil {
		return err
	}
	suite.daemonFlags = daemonUsage()
	suite.noCgroup = os.Getenv(noCgroupEnv) == "1"
	suite.mechanism = os.Getenv("SANDBOXD_CONFORMANCE_MECHANISM")
	suite.wrap = strings.Fields(os.Getenv("SANDBOXD_CONFORMANCE_WRAP"))
	if err := hostOptions(); err != nil {
		return err
	}
	suite.leak = "leak-" + randomHex()
	if err := os.Setenv(leakVar, suite.leak); err != nil {
		return err
	}
	d, err := startDaemon(filepath.Join(root, "run"))
	if err != nil {
		return err
	}
	suite.daemon = d
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	suite.client, err = client.Dial(ctx, d.socket)
	if err != nil {
		return err
	}
	suite.caps, err = suite.client.Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	hostCapabilities()
	for _, p := range suite.caps.GetProbes() {
		if !p.GetOk() {
			fmt.Fprintf(os.Stderr, "conformance: host probe failed: %s: %s %s\n", p.GetName(), p.GetOperation(), p.GetErrno())
		}
	}
	return nil
}

// tearDown stops the suite's daemon and removes its directory; clean is
// false when something was left mounted beneath it, which it unmounts
// first: no daemon nor test may leave a mount on the host.
func tearDown() (clean bool) {
	if suite.client != nil {
		suite.client.Close()
	}
	if suite.daemon != nil {
		suite.daemon.stop()
	}
	clean = true
	if suite.root != "" {
		mounts, err := unmountBeneath(suite.root)
		if len(mounts) > 0 || err != nil {
			fmt.Fprintf(os.Stderr, "conformance: left mounted beneath %s at the end of the run (unmounted now): %q %v\n", suite.root, mounts, err)
			clean = false
		}
		os.RemoveAll(suite.root)
	}
	return clean
}

// buildBinaries puts sandboxd, sandboxctl, the probe and the host's own
// tools (hostBinaries) in bin, from SANDBOXD_CONFORMANCE_BIN when set (the
// rootless run, whose user cannot use root's Go caches) or else with go
// build.
func buildBinaries(bin string) error {
	suite.sandboxd = filepath.Join(bin, "sandboxd")
	suite.sandboxctl = filepath.Join(bin, "sandboxctl")
	suite.probe = filepath.Join(bin, "probe")
	if pre := os.Getenv("SANDBOXD_CONFORMANCE_BIN"); pre != "" {
		suite.sandboxd = filepath.Join(pre, "sandboxd")
		suite.sandboxctl = filepath.Join(pre, "sandboxctl")
		hostBinaries(pre)
		// The probe is copied: it must be where sandboxes can see it.
		return copyFile(filepath.Join(pre, "probe"), suite.probe, 0o755)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go not found to build the binaries (or set SANDBOXD_CONFORMANCE_BIN): %w", err)
	}
	pkgs := map[string]string{
		suite.sandboxd:   "github.com/sandboxd/sandboxd/cmd/sandboxd",
		suite.sandboxctl: "github.com/sandboxd/sandboxd/cmd/sandboxctl",
		suite.probe:      "github.com/sandboxd/sandboxd/internal/conformance/probe",
	}
	maps.Copy(pkgs, hostBinaries(bin))
	for out, pkg := range pkgs {
		cmd := exec.Command(gobin, "build", "-buildvcs=false", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return buildNative(bin)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// credentialOf runs a host process as uid, with uid as its group and groups as
// its supplementary groups.
func credentialOf(uid int, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: groups}}
}

// leakVar is set in the daemon's and the client's environment; its value
// must never show up inside a sandbox.
const leakVar = "SANDBOXD_CONFORMANCE_LEAK"

// writeProxyHosts writes the hosts file the daemon is given with
// --proxy-hosts: its names are pinned for the proxy's own resolution,
// trusted even though they point at the loopback.
func writeProxyHosts(path string) error {
	suite.proxyHosts = path
	content := "# sandboxd conformance suite: names its allowlist cases ask the proxy for\n" +
		"127.0.0.1 " + strings.Join([]string{allowedName, otherName, wildSub, wildApex}, " ") + "\n"
	return os.WriteFile(path, []byte(content), 0o644)
}

// daemonUsage is what the built sandboxd says its flags are.
func daemonUsage() string {
	out, _ := exec.Command(suite.sandboxd, "-h").CombinedOutput()
	return string(out)
}

// holdArgv is a command that runs until it is killed.
func holdArgv() []string {
	return []string{"/bin/sleep", "30"}
}
