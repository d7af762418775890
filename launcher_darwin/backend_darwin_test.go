//go:build darwin

package launcherdarwin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary a helper program run inside the sandbox.
const helperEnv = "SANDBOXD_DARWIN_TEST_HELPER"

func TestMain(m *testing.M) {
	// The backend guards every session with this binary.
	RunGuardIfRequested()
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "daemonize":
		// What a daemon does: a child in a session of its own, then the
		// parent leaves.
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c := exec.Command(self)
		c.Env = []string{helperEnv + "=sleep"}
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(c.Process.Pid)
		time.Sleep(time.Second)
		os.Exit(0)
	case "sleep":
		time.Sleep(5 * time.Minute)
		os.Exit(0)
	}
	os.Exit(2)
}

var (
	testBackendOnce sync.Once
	testBackend     launcher.Backend
	testBackendErr  error
)

func newTestBackend(t *testing.T) launcher.Backend {
	t.Helper()
	testBackendOnce.Do(func() { testBackend, testBackendErr = New(Config{}) })
	if testBackendErr != nil {
		t.Fatal(testBackendErr)
	}
	if u := testBackend.(*backend).host.Refusal(); u != nil {
		t.Fatalf("Seatbelt does not work on this Mac: %v", u)
	}
	return testBackend
}

func tempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testPolicy(write ...string) *sandboxdv1.Policy {
	return &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_ALL, Write: write},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
		Limits:     &sandboxdv1.Limits{},
		Children:   &sandboxdv1.Children{},
	}
}

var sessionCounter struct {
	sync.Mutex
	n int
}

func testSpec(t *testing.T, pol *sandboxdv1.Policy, argv ...string) launcher.Spec {
	t.Helper()
	sessionCounter.Lock()
	sessionCounter.n++
	id := fmt.Sprintf("test-%d-%d", os.Getpid(), sessionCounter.n)
	sessionCounter.Unlock()
	return launcher.Spec{
		SessionID: id, Policy: pol, Argv: argv,
		Env: []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"}, Cwd: tempDir(t),
		UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()),
	}
}

// run starts spec with its output in a pipe and returns the status and
// the output.
func run(t *testing.T, b launcher.Backend, spec launcher.Spec) (launcher.Status, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec.Stdio = launcher.Stdio{Stdout: w, Stderr: w}
	p, err := b.Start(context.Background(), spec)
	w.Close()
	if err != nil {
		t.Fatalf("start %q: %v", spec.Argv, err)
	}
	out, _ := io.ReadAll(r)
	st, err := p.Wait()
	if err != nil {
		t.Fatalf("wait %q: %v", spec.Argv, err)
	}
	return st, string(out)
}

func TestStartExitStatus(t *testing.T) {
	b := newTestBackend(t)
	st, out := run(t, b, testSpec(t, testPolicy(), "/bin/sh", "-c", "echo hello; exit 3"))
	if st.ExitCode != 3 || st.Signal != 0 || out != "hello\n" {
		t.Errorf("status %+v output %q, want exit 3 and hello", st, out)
	}
}

func TestEnvironmentIsExactlyTheSpecs(t *testing.T) {
	b := newTestBackend(t)
	spec := testSpec(t, testPolicy(), "/usr/bin/env")
	spec.Env = append(spec.Env, "SANDBOXD_SESSION=x")
	_, out := run(t, b, spec)
	if got := strings.Fields(out); len(got) != 2 || got[0] != spec.Env[0] || got[1] != spec.Env[1] {
		t.Errorf("environment %q, want %q", got, spec.Env)
	}
}

func TestWritesOnlyBelowWriteRoots(t *testing.T) {
	b := newTestBackend(t)
	inside, outside := tempDir(t), tempDir(t)
	st, out := run(t, b, testSpec(t, testPolicy(inside), "/bin/sh", "-c", `echo a > "$0/in"; echo b > "$1/out"; exit 0`, inside, outside))
	if st.ExitCode != 0 {
		t.Fatalf("status %+v output %q", st, out)
	}
	if _, err := os.Stat(filepath.Join(inside, "in")); err != nil {
		t.Errorf("write inside the write root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "out")); err == nil {
		t.Errorf("write outside the write roots succeeded")
	}
	if !strings.Contains(out, "Operation not permitted") {
		t.Errorf("output %q, want the refusal", out)
	}
}

func TestExecErrors(t *testing.T) {
	b := newTestBackend(t)
	spec := testSpec(t, testPolicy(), "no-such-command-sandboxd")
	_, err := b.Start(context.Background(), spec)
	var ee *launcher.ExecError
	if !errors.As(err, &ee) || ee.Op != "execve" || ee.ExitCode() != 127 {
		t.Errorf("missing command: %v, want an execve error exiting 127", err)
	}
	spec = testSpec(t, testPolicy(), "/bin/sh", "-c", "true")
	spec.Cwd = filepath.Join(spec.Cwd, "missing")
	_, err = b.Start(context.Background(), spec)
	if !errors.As(err, &ee) || ee.Op != "chdir" || ee.Errno != syscall.ENOENT {
		t.Errorf("missing working directory: %v, want a chdir error", err)
	}
}

func TestSignal(t *testing.T) {
	b := newTestBackend(t)
	p, err := b.Start(context.Background(), testSpec(t, testPolicy(), "/bin/sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil || st.Signal != syscall.SIGTERM {
		t.Errorf("status %+v %v, want SIGTERM", st, err)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal after wait: %v", err)
	}
}

func TestKillEndsEveryProcess(t *testing.T) {
	b := newTestBackend(t)
	p, err := b.Start(context.Background(), testSpec(t, testPolicy(), "/bin/sh", "-c", "sleep 300 & sleep 300 & wait"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	done := make(chan launcher.Status)
	go func() {
		st, _ := p.Wait()
		done <- st
	}()
	select {
	case st := <-done:
		if st.Signal != syscall.SIGKILL {
			t.Errorf("status %+v, want SIGKILL", st)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Wait did not return after Kill")
	}
}

func TestDaemonizedProcessEndsWithTheSession(t *testing.T) {
	b := newTestBackend(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, testPolicy(), self)
	spec.Env = append(spec.Env, helperEnv+"=daemonize")
	st, out := run(t, b, spec)
	if st.ExitCode != 0 {
		t.Fatalf("helper: status %+v output %q", st, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("helper output %q", out)
	}
	// SIGKILL has been sent; launchd reaps the zombie shortly after.
	deadline := time.Now().Add(5 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			t.Fatalf("the daemonized process %d outlived its session", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTerminal(t *testing.T) {
	b := newTestBackend(t)
	// /dev/tty opens only for a process whose session has the terminal
	// as its controlling terminal.
	spec := testSpec(t, testPolicy(), "/bin/sh", "-c", "stty size </dev/tty")
	spec.Stdio = launcher.Stdio{Terminal: true, Rows: 24, Cols: 100}
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	master := p.Terminal()
	if master == nil {
		t.Fatal("no terminal")
	}
	defer master.Close()
	out := make(chan string)
	go func() {
		// Reading ends with EIO once the last process holding the
		// terminal is gone.
		b, _ := io.ReadAll(master)
		out <- string(b)
	}()
	st, err := p.Wait()
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
	select {
	case got := <-out:
		if !strings.Contains(got, "24 100") {
			t.Errorf("terminal output %q, want its size", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("terminal output did not end")
	}
}

func TestDenialObserved(t *testing.T) {
	b := newTestBackend(t)
	dir := tempDir(t)
	secret := filepath.Join(dir, "secret")
	if err := os.MkdirAll(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(secret, "key")
	if err := os.WriteFile(key, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := testPolicy()
	pol.Filesystem.Deny = []string{secret}
	spec := testSpec(t, pol, "/bin/cat", key)
	denials := make(chan *sandboxdv1.Denial, 256)
	spec.OnDenial = func(d *sandboxdv1.Denial) {
		select {
		case denials <- d:
		default:
		}
	}
	spec.Stdio = launcher.Stdio{}
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Enforcement().GetDenialSources() {
		if s.GetKind() == "filesystem.read" && !s.GetObserved() {
			p.Wait()
			t.Skipf("denials are not observed here: %s", s.GetHow())
		}
	}
	st, err := p.Wait()
	if err != nil || st.ExitCode == 0 {
		t.Fatalf("reading a deny path: status %+v %v", st, err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case d := <-denials:
			if d.GetTarget() == key {
				if d.GetField() != "filesystem.deny" || d.GetCommand() != "cat" || d.GetHostPid() == 0 {
					t.Errorf("denial %v", d)
				}
				return
			}
		case <-timeout:
			t.Fatal("the refused read was not reported")
		}
	}
}

func TestCapabilitiesHere(t *testing.T) {
	b := newTestBackend(t)
	r := b.Capabilities()
	if sets := r.GetMechanismSets(); len(sets) != 1 || !sets[0].GetAvailable() {
		t.Errorf("mechanism sets %v", sets)
	}
	for _, p := range r.GetProbes() {
		if !p.GetOk() {
			t.Errorf("probe %v failed", p)
		}
	}
	if !strings.HasPrefix(r.GetHost().GetKernel(), "macOS ") {
		t.Errorf("kernel %q", r.GetHost().GetKernel())
	}
}
