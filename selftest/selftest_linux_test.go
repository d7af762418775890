package selftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/initbuild"
	"github.com/sandboxd/sandboxd/launcher"
	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	launcherlinux.RunProbeIfRequested()
	RunProbeIfRequested()
	holdFixturesIfRequested()
	code := m.Run()
	initbuild.RemoveShared()
	os.Exit(code)
}

// identity is what the daemon would pass: root's sandboxes run as an
// unprivileged uid, anyone else's as themselves.
func identity() (uid, gid uint32) {
	if os.Geteuid() == 0 {
		return 65533, 65533
	}
	return uint32(os.Getuid()), uint32(os.Getgid())
}

// scratchDir is a directory sandboxes see at the same path: t.TempDir is
// under /tmp, which they see as a private tmpfs.
func scratchDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "selftest-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func checksByName(st *sandboxdv1.SelfTest) map[string]*sandboxdv1.SelfTestCheck {
	m := map[string]*sandboxdv1.SelfTestCheck{}
	for _, c := range st.GetChecks() {
		m[c.GetName()] = c
	}
	return m
}

func logChecks(t *testing.T, st *sandboxdv1.SelfTest) {
	t.Helper()
	for _, c := range st.GetChecks() {
		t.Logf("ok=%v %s: %s", c.GetOk(), c.GetName(), c.GetDetail())
	}
}

func wantNoLeftovers(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("self-test left %v in %s", left, dir)
	}
}

func TestRealBackendPasses(t *testing.T) {
	uid, gid := identity()
	for _, set := range []string{"", "namespaces", "landlock"} {
		t.Run("mechanism="+set, func(t *testing.T) {
			initPath, err := initbuild.Shared()
			if err != nil {
				t.Fatal(err)
			}
			b, err := launcherlinux.New(launcherlinux.Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: set, InitPath: initPath})
			if err != nil {
				t.Fatal(err)
			}
			dir := scratchDir(t)
			st := Run(ctxT(t, 20*time.Second), b, uid, gid, dir)
			logChecks(t, st)
			checks := checksByName(st)
			if set != "" && len(st.GetChecks()) == 1 && !checks["start"].GetOk() {
				// A host may lack one set; the automatic choice must pass.
				t.Skipf("this host refuses mechanism set %s: %s", set, checks["start"].GetDetail())
			}
			if !st.GetPassed() {
				t.Fatalf("%s", Summary(st))
			}
			for _, name := range []string{"start", StepWriteRoot, StepWriteOutside, StepChmodOutside, StepReadDeny, StepTCPLoopback, StepUnixSocket, StepSignalDaemon, StepNonRoot, "exit"} {
				if !checks[name].GetOk() {
					t.Errorf("check %q missing or failed", name)
				}
			}
			if set != "" && st.GetMechanismSet() != set {
				t.Errorf("mechanism set %q, want the forced %q", st.GetMechanismSet(), set)
			}
			if st.GetRan() == nil {
				t.Error("no ran time")
			}
			wantNoLeftovers(t, dir)
		})
	}
}

// unconfined starts the probe as a plain child process, without any
// sandbox: a self-test that passed against it would prove nothing.
type unconfined struct {
	refuse error
}

func (u *unconfined) Name() string { return "unconfined" }

func (u *unconfined) Capabilities() *sandboxdv1.CapabilitiesReport {
	return &sandboxdv1.CapabilitiesReport{Backend: "unconfined"}
}

func (u *unconfined) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	if u.refuse != nil {
		return nil, u.refuse
	}
	cmd := &exec.Cmd{
		Path: spec.Argv[0], Args: spec.Argv, Env: spec.Env, Dir: spec.Cwd,
		Stdin: spec.Stdio.Stdin, Stdout: spec.Stdio.Stdout, Stderr: spec.Stdio.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &plainProcess{cmd: cmd}, nil
}

type plainProcess struct {
	cmd *exec.Cmd
}

func (p *plainProcess) Pid() int { return p.cmd.Process.Pid }
func (p *plainProcess) Enforcement() *sandboxdv1.EnforcementReport {
	return &sandboxdv1.EnforcementReport{Backend: "unconfined", MechanismSet: "none"}
}
func (p *plainProcess) Terminal() *os.File { return nil }
func (p *plainProcess) Signal(sig syscall.Signal) error {
	return syscall.Kill(p.cmd.Process.Pid, sig)
}
func (p *plainProcess) Kill() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
func (p *plainProcess) Wait() (launcher.Status, error) {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return launcher.Status{Signal: ws.Signal()}, nil
		}
		return launcher.Status{ExitCode: ee.ExitCode()}, nil
	}
	return launcher.Status{}, err
}

func TestUnconfinedProbeFails(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	dir := scratchDir(t)
	st := Run(ctxT(t, 20*time.Second), &unconfined{}, uid, gid, dir)
	logChecks(t, st)
	if st.GetPassed() {
		t.Fatal("the self-test passed with an unconfined probe")
	}
	if st.GetMechanismSet() != "none" {
		t.Errorf("mechanism set %q, want the process's", st.GetMechanismSet())
	}
	checks := checksByName(st)
	// The probe ran and reported: these show the fixtures work and only a
	// sandbox made the real-backend run pass.
	for _, name := range []string{"start", StepWriteRoot, "exit"} {
		if !checks[name].GetOk() {
			t.Errorf("check %q failed: %s", name, checks[name].GetDetail())
		}
	}
	for _, name := range []string{StepWriteOutside, StepChmodOutside, StepReadDeny, StepTCPLoopback, StepUnixSocket, StepSignalDaemon} {
		c := checks[name]
		if c.GetOk() || !strings.Contains(c.GetDetail(), "NOT denied") {
			t.Errorf("check %q: ok=%v %s; want NOT denied", name, c.GetOk(), c.GetDetail())
		}
	}
	if os.Geteuid() == 0 && checks[StepNonRoot].GetOk() {
		t.Errorf("non-root check passed for a probe running as root")
	}
	wantNoLeftovers(t, dir)
}

func TestRefusalIsTheResult(t *testing.T) {
	refusal := &launcher.Unenforceable{Field: "network.mode", Mechanism: "network namespace", Remedy: "enable user namespaces"}
	dir := scratchDir(t)
	st := Run(ctxT(t, 20*time.Second), &unconfined{refuse: refusal}, uint32(os.Getuid()), uint32(os.Getgid()), dir)
	if st.GetPassed() || len(st.GetChecks()) != 1 {
		t.Fatalf("got %v", st)
	}
	if c := st.GetChecks()[0]; c.GetName() != "start" || c.GetOk() || c.GetDetail() != refusal.Error() {
		t.Errorf("check %v, want start failing with %q", c, refusal.Error())
	}
	wantNoLeftovers(t, dir)
}

// stuck runs something that never reports, standing in for a probe that
// hangs in the sandbox.
type stuck struct{ unconfined }

func (s *stuck) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	spec.Argv = []string{"/bin/sleep", "60"}
	return s.unconfined.Start(ctx, spec)
}

func TestContextBoundsTheRun(t *testing.T) {
	dir := scratchDir(t)
	begin := time.Now()
	st := Run(ctxT(t, time.Second), &stuck{}, uint32(os.Getuid()), uint32(os.Getgid()), dir)
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Run took %v after its context ended", d)
	}
	logChecks(t, st)
	checks := checksByName(st)
	if st.GetPassed() || checks["exit"].GetOk() || !strings.Contains(checks["exit"].GetDetail(), "killed") {
		t.Errorf("exit check %v", checks["exit"])
	}
	if c := checks[StepWriteRoot]; c.GetOk() || !strings.Contains(c.GetDetail(), "no result") {
		t.Errorf("write-root check %v", c)
	}
	wantNoLeftovers(t, dir)
}

func TestCheckDir(t *testing.T) {
	uid, gid := uint32(65533), uint32(65533)
	if err := CheckDir("/var/tmp", uid, gid); err != nil {
		t.Errorf("/var/tmp: %v", err)
	}
	for _, bad := range []string{"/tmp", "/tmp/x", "relative", "/no/such/dir", "/var/tmp/" + strings.Repeat("d", 70)} {
		if err := CheckDir(bad, uid, gid); err == nil {
			t.Errorf("CheckDir(%q) accepted it", bad)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a directory another uid cannot search")
	}
	closed := filepath.Join(scratchDir(t), "closed")
	if err := os.MkdirAll(filepath.Join(closed, "in"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := CheckDir(filepath.Join(closed, "in"), uid, gid)
	if err == nil || !strings.Contains(err.Error(), "cannot search "+closed) {
		t.Errorf("CheckDir under a 0700 root directory: %v", err)
	}
	st := Run(ctxT(t, 5*time.Second), &unconfined{}, uid, gid, filepath.Join(closed, "in"))
	if st.GetPassed() || len(st.GetChecks()) != 1 || st.GetChecks()[0].GetName() != "setup" {
		t.Errorf("Run in an unreachable directory: %v", st)
	}

	noexec := filepath.Join(scratchDir(t), "noexec")
	if err := os.Mkdir(noexec, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", noexec, "tmpfs", unix.MS_NOEXEC, "mode=0755"); err != nil {
		t.Skipf("cannot mount a noexec tmpfs here: %v", err)
	}
	defer unix.Unmount(noexec, unix.MNT_DETACH)
	if err := CheckDir(noexec, uid, gid); err == nil || !strings.Contains(err.Error(), "noexec") {
		t.Errorf("CheckDir on a noexec mount: %v", err)
	}
}

func TestFixturesAreRemovedWhenSetupFails(t *testing.T) {
	// Too long for the unix socket fixture, which is made after the rest.
	long := filepath.Join(scratchDir(t), strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	fx, err := newFixtures(long, uint32(os.Getuid()), uint32(os.Getgid()))
	if err == nil {
		fx.close()
		t.Fatal("newFixtures made a unix socket at a path longer than sun_path")
	}
	wantNoLeftovers(t, long)
}

func TestStaleFixturesAreRemoved(t *testing.T) {
	dir := scratchDir(t)
	stale := filepath.Join(dir, scratchPrefix+"1")
	fresh := filepath.Join(dir, scratchPrefix+"2")
	other := filepath.Join(dir, "unrelated")
	for _, d := range []string{stale, fresh, other} {
		if err := os.MkdirAll(filepath.Join(d, "write"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleAfter)
	for _, d := range []string{stale, other} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(dir)
	for d, want := range map[string]bool{stale: false, fresh: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", d, err == nil, want)
		}
	}
}

// holdFixturesEnv, set to a directory, makes the test binary a self-test
// that made its fixtures there, printed their directory, and waits to be
// killed.
const holdFixturesEnv = "SANDBOXD_TEST_HOLD_FIXTURES"

func holdFixturesIfRequested() {
	dir := os.Getenv(holdFixturesEnv)
	if dir == "" {
		return
	}
	fx, err := newFixtures(dir, uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(fx.scratch)
	time.Sleep(time.Hour)
	os.Exit(1)
}

// A self-test killed with its fixtures in place (a daemon SIGKILLed during
// its start-up self-test) leaves them to the next start, which removes
// them at once; the fixtures of a self-test that runs stay.
func TestFixturesOfADeadOwnerAreRemoved(t *testing.T) {
	dir := scratchDir(t)
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), holdFixturesEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the holding process printed no fixtures: %v", err)
	}
	dead := strings.TrimSpace(line)
	cmd.Process.Kill()
	cmd.Wait()
	live, err := newFixtures(dir, uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("the fixtures of a self-test killed are still there after the next one started: %s", dead)
	}
	removeStale(dir)
	if _, err := os.Stat(live.probe); err != nil {
		t.Errorf("the fixtures of a self-test that runs were removed: %v", err)
	}
}
