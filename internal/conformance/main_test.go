package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// sandboxUID is what a root daemon is told to run root callers' sandboxes
// as. Fixtures are handed to it, so that only the sandbox, never plain file
// permissions, stands between the probe and what a case forbids.
const sandboxUID = 65533

var suite struct {
	sandboxd, sandboxctl, probe string
	// root holds the binaries the sandboxes run and every fixture.
	root   string
	asRoot bool
	// uid and gid are the host identity of sandboxed processes.
	uid, gid int
	leak     string
	daemon   *daemonProc
	client   *client.Client
	// mechanism is the set the daemon was forced to (--mechanism), "" for
	// its own choice; wrap is the command the daemon runs under to
	// simulate a degraded host.
	mechanism string
	wrap      []string
	caps      *sandboxdv1.CapabilitiesReport
	// proxyHosts is the hosts file the daemon's allowlist proxy resolves
	// the suite's names with (see proxyHostsFile); daemonFlags are the
	// flags the built sandboxd has, for those only some versions know.
	proxyHosts  string
	daemonFlags string
	// noCgroup lets cases accept a refusal of the cgroup limits (see
	// noCgroupEnv).
	noCgroup bool
}

// daemonProc is a sandboxd started by the suite.
type daemonProc struct {
	cmd    *exec.Cmd
	socket string
	log    string
	// state is its --state-dir, where its audit log is.
	state  string
	exited chan struct{}
}

// startDaemon starts the suite's sandboxd with its socket in dir and waits
// until it answers. Its environment carries leakVar.
func startDaemon(dir string) (*daemonProc, error) {
	var args []string
	if suite.mechanism != "" {
		args = append(args, "--mechanism", suite.mechanism)
	}
	if daemonHasFlag("proxy-hosts") {
		args = append(args, "--proxy-hosts", suite.proxyHosts)
	}
	return startDaemonWith(dir, suite.wrap, args...)
}

// proxyNames are the names the suite's proxy hosts file pins to the host's
// loopback, where the cases' servers listen: the sandbox reaches them
// through the daemon's allowlist proxy or not at all. They are under .test
// (RFC 2606), which no resolver answers for, so nothing but the file gives
// them an address.
const (
	allowedName = "allowed.test"
	otherName   = "other.test"
	wildApex    = "wild.test"
	wildSub     = "a.wild.test"
)

// daemonHasFlag says whether the built sandboxd has --name. A sandboxd
// without --proxy-hosts is started without it: its allowlist cases then
// fail on their own (it refuses ALLOWLIST, or its proxy cannot resolve the
// suite's names), while every other case still runs.
func daemonHasFlag(name string) bool {
	return regexp.MustCompile(`(?m)^\s+--?` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(suite.daemonFlags)
}

// noCgroupEnv, set to 1, lets the cases of limits.memory_bytes, limits.pids
// and limits.cpu_millis accept a structured refusal of their field, for a
// host where the daemon has no cgroup to enforce them with (a rootless
// daemon without a delegated subtree). Off by default: wherever the suite
// runs normally, root or rootless (scripts/rootless-test.sh delegates a
// cgroup), those limits must be enforced, never refused.
const noCgroupEnv = "SANDBOXD_CONFORMANCE_NO_CGROUP"

// startDaemonWith starts sandboxd under the command wrap (a degraded host),
// with extra arguments.
func startDaemonWith(dir string, wrap []string, extra ...string) (*daemonProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &daemonProc{
		socket: filepath.Join(dir, "sandboxd.sock"),
		log:    filepath.Join(dir, "sandboxd.log"),
		state:  filepath.Join(dir, "state"),
		exited: make(chan struct{}),
	}
	// Port 0: the daemon logs the address it got (see metricsURL).
	args := []string{"--socket", d.socket, "--state-dir", d.state, "--metrics", "127.0.0.1:0"}
	if suite.asRoot {
		args = append(args, "--sandbox-uid", strconv.Itoa(sandboxUID), "--sandbox-gid", strconv.Itoa(sandboxUID))
	}
	args = append(args, extra...)
	logf, err := os.Create(d.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	argv := append(append(slices.Clone(wrap), suite.sandboxd), args...)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = os.Environ()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = daemonProcAttr()
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := client.Dial(ctx, d.socket)
		cancel()
		if err == nil {
			c.Close()
			return d, nil
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("sandboxd exited at start: %s", d.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.kill()
			return nil, fmt.Errorf("sandboxd did not answer on %s: %v; log: %s", d.socket, err, d.logTail())
		}
	}
}

func (d *daemonProc) logTail() string {
	b, _ := os.ReadFile(d.log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// stop asks the daemon to shut down and kills it if it does not.
func (d *daemonProc) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.kill()
	}
}

func (d *daemonProc) kill() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

func (d *daemonProc) dead() bool {
	select {
	case <-d.exited:
		return true
	default:
		return false
	}
}

func randomHex() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// requireDaemon fails the test when the shared daemon has died, so one
// crash is reported as such instead of as every later case failing. On
// Windows the daemon is the installed service, not a process of the suite
// (suite.daemon is nil): a dead service fails the case's own call.
func requireDaemon(t *testing.T) {
	t.Helper()
	if suite.daemon != nil && suite.daemon.dead() {
		t.Fatalf("sandboxd has exited; log: %s", suite.daemon.logTail())
	}
}
