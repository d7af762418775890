package launcherlinux

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/hostsim"
	"github.com/sandboxd/sandboxd/internal/initbuild"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"golang.org/x/sys/unix"
)

// initBinaryPath builds cmd/sandboxd-init, the init the daemon starts, once
// per test binary.
func initBinaryPath(tb testing.TB) string {
	tb.Helper()
	path, err := initbuild.Shared()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// prestartedBackend starts its sandbox inits ahead, from the init binary.
func prestartedBackend(tb testing.TB, set MechanismSet) *backend {
	tb.Helper()
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(set), InitPath: initBinaryPath(tb), Prestart: 2})
	if err != nil {
		tb.Fatal(err)
	}
	be := b.(*backend)
	tb.Cleanup(func() { drainPool(be.inits) })
	return be
}

// drainPool stops the inits a test's backend started ahead, as the daemon
// exiting would.
func drainPool(p *initPool) {
	p.mu.Lock()
	p.size = 0
	var all []*initProc
	for key, q := range p.ready {
		all = append(all, q...)
		delete(p.ready, key)
	}
	p.mu.Unlock()
	for _, ip := range all {
		ip.discard()
	}
}

// readyPids waits until the pool holds n inits for key and returns their
// pids.
func readyPids(t *testing.T, p *initPool, key initKey, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		var pids []int
		for _, ip := range p.ready[key] {
			pids = append(pids, ip.proc.pid)
		}
		p.mu.Unlock()
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d inits for %+v after 10s, want %d", len(pids), key, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runTrue(t *testing.T, b launcher.Backend, spec launcher.Spec) int {
	t.Helper()
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	return pid
}

func TestPrestartedInitsServeLaunchesWithTheirOwnStdio(t *testing.T) {
	for _, set := range MechanismSets {
		t.Run(string(set), func(t *testing.T) {
			b := prestartedBackend(t, set)
			spec := testSpec(t, nil, "/bin/sh", "-c", "echo out; echo err >&2; read line; echo got $line")
			uid, gid := sandboxIdentity()
			key := initKey{uid: uid, gid: gid, namespaces: set == SetNamespaces, netns: set == SetNamespaces}
			runTrue(t, b, testSpec(t, nil, "/bin/true"))
			pooled := readyPids(t, b.inits, key, 2)

			stdinR, stdinW, _ := os.Pipe()
			outR, outW, _ := os.Pipe()
			errR, errW, _ := os.Pipe()
			spec.Stdio = launcher.Stdio{Stdin: stdinR, Stdout: outW, Stderr: errW}
			p, err := b.Start(context.Background(), spec)
			stdinR.Close()
			outW.Close()
			errW.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(pooled, p.Pid()) {
				t.Errorf("launch used init %d, not one of the prestarted %v", p.Pid(), pooled)
			}
			stdinW.WriteString("hello\n")
			stdinW.Close()
			out, _ := readAll(outR)
			errOut, _ := readAll(errR)
			if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
				t.Fatalf("status %+v, %v", st, err)
			}
			if out != "out\ngot hello\n" || errOut != "err\n" {
				t.Errorf("stdout %q, stderr %q: the session's stdio did not reach the command", out, errOut)
			}
		})
	}
}

func readAll(f *os.File) (string, error) {
	defer f.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String(), nil
		}
	}
}

// An init cloned before a host mount has a copy of the old mount table;
// once the daemon sees the change, no launch may use it.
func TestHostMountRetiresPrestartedInits(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting on the host needs root; the pool's watch is the same for every daemon")
	}
	b := prestartedBackend(t, SetNamespaces)
	uid, gid := sandboxIdentity()
	key := initKey{uid: uid, gid: gid, namespaces: true, netns: true}
	runTrue(t, b, testSpec(t, nil, "/bin/true"))
	stale := readyPids(t, b.inits, key, 2)
	gen := b.inits.mounts.generation()

	dir := hostDir(t, 0o755)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0777"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	deadline := time.Now().Add(5 * time.Second)
	for b.inits.mounts.generation() == gen {
		if time.Now().After(deadline) {
			t.Fatal("the mount watch saw no change in 5s")
		}
		time.Sleep(time.Millisecond)
	}
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{dir}}}
	pid := runTrue(t, b, testSpec(t, pol, "/bin/sh", "-c", "echo x > "+dir+"/written"))
	if slices.Contains(stale, pid) {
		t.Errorf("launch used init %d, cloned before the mount", pid)
	}
	if _, err := os.Stat(dir + "/written"); err != nil {
		t.Errorf("the sandbox wrote below the mount's old place, not into it: %v", err)
	}
}

// The init reports a plan it cannot decode as a setup error naming the
// plan, and does nothing else.
func TestInitRefusesABrokenPlan(t *testing.T) {
	planR, planW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer repR.Close()
	cmd := exec.Command(initBinaryPath(t))
	cmd.Args[0] = sandboxinit.Arg0
	cmd.ExtraFiles = []*os.File{planR, repW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	planR.Close()
	repW.Close()
	planW.Write([]byte(`{"namespaces":true}`))
	planW.Close()
	err = cmd.Wait()
	report, _ := readAll(repR)
	if !strings.Contains(report, `"type":"setup-error"`) || !strings.Contains(report, `"op":"read plan"`) || !strings.Contains(report, "bad magic") {
		t.Errorf("init reported %q for a JSON plan", report)
	}
	if cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("init exited %v, want 1", err)
	}
}

// Run by hand, under any other name, the init says what it is and exits 2.
func TestInitIsNotRunByHand(t *testing.T) {
	out, err := exec.Command(initBinaryPath(t)).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "not run by hand") {
		t.Errorf("init run by hand: %v, %q", err, out)
	}
}

// BenchmarkStartTruePrestarted is BenchmarkStartTrue as the daemon runs it:
// the small init binary, started ahead.
func BenchmarkStartTruePrestarted(b *testing.B) {
	for _, set := range MechanismSets {
		b.Run(string(set), func(b *testing.B) {
			be := prestartedBackend(b, set)
			spec := testSpec(b, nil, "/bin/true")
			b.ReportAllocs()
			// The daemon's own CPU time per launch (the spawner's and the
			// inits' are not in it): what the launches a host can make per
			// second are bounded by, unlike the wall time.
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := be.Start(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
					b.Fatalf("status %+v, %v", st, err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func TestInitBinaryMustBeAsTrustedAsTheDaemon(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "sandboxd")
	if err := os.WriteFile(self, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := beside(self, initBinary); err == nil || !strings.Contains(err.Error(), "make") {
		t.Errorf("no init beside the daemon: %q, %v; want an error saying how to build it", got, err)
	}
	initPath := filepath.Join(dir, initBinary)
	if err := os.WriteFile(initPath, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := beside(self, initBinary); err != nil || got != initPath {
		t.Errorf("initPath beside the daemon: %q, %v", got, err)
	}
	if err := os.Chmod(initPath, 0o775); err != nil {
		t.Fatal(err)
	}
	if got, err := beside(self, initBinary); err == nil {
		t.Errorf("group-writable initPath accepted: %q", got)
	}
	if os.Getuid() == 0 {
		os.Chmod(initPath, 0o755)
		if err := os.Chown(initPath, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if got, err := beside(self, initBinary); err == nil {
			t.Errorf("initPath owned by a stranger accepted: %q", got)
		}
		// The daemon's own binary owned by that uid, as files of an
		// unmapped owner all show up in a user namespace: equally trusted.
		if err := os.Chown(self, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if got, err := beside(self, initBinary); err != nil || got != initPath {
			t.Errorf("initPath owned as the daemon binary is: %q, %v", got, err)
		}
	}
}

// A report line longer than the reader's buffer, as a setup error with a
// long path makes, is read whole; one beyond maxReportLine is refused.
func TestReportLinesLongerThanTheBuffer(t *testing.T) {
	long := strings.Repeat("/deep", 1000)
	line := `{"type":"setup-error","path":"` + long + `"}` + "\n" + `{"type":"exit","code":3}` + "\n"
	p := &process{report: bufio.NewReaderSize(strings.NewReader(line), reportBuffer)}
	if m, err := p.next(); err != nil || m.Type != "setup-error" || m.Path != long {
		t.Errorf("long line: %+v, %v", m, err)
	}
	if m, err := p.next(); err != nil || m.Type != "exit" || m.Code != 3 {
		t.Errorf("the line after it: %+v, %v", m, err)
	}
	huge := `{"type":"exit","detail":"` + strings.Repeat("x", maxReportLine) + `"}` + "\n"
	p = &process{report: bufio.NewReaderSize(strings.NewReader(huge), reportBuffer)}
	if m, err := p.next(); err == nil {
		t.Errorf("a line beyond %d bytes was read: %+v", maxReportLine, m.Type)
	}
}

// The spawner's inits end with it, and it ends when the daemon's end of its
// socket closes (as when the daemon dies): nothing is left behind.
func TestInitsEndWithTheSpawner(t *testing.T) {
	uid, gid := sandboxIdentity()
	sp := newSpawner(initBinaryPath(t))
	ip, err := startInit(sp, initKey{uid: uid, gid: gid, namespaces: true}, 0)
	if err != nil {
		t.Skipf("this host cannot start a namespaced init: %v", err)
	}
	defer ip.plan.Close()
	defer ip.report.Close()
	defer ip.pass.Close()
	if err := ip.proc.signal(0); err != nil {
		t.Fatalf("init %d not running: %v", ip.proc.pid, err)
	}
	for _, l := range sp.lanes {
		l.mu.Lock()
		if l.sock != nil {
			l.stop()
		}
		l.mu.Unlock()
	}
	// Returns only once the init is gone; the test's timeout catches one
	// that stays.
	ip.proc.wait()
}

// A request made while a spawner is busy goes to another one (a host with
// more than one processor has several): launches from several clients
// queued behind one spawner's clones while the other processors idled.
func TestABusySpawnerLeavesTheRequestToAnother(t *testing.T) {
	uid, gid := sandboxIdentity()
	sp := newSpawner(initBinaryPath(t))
	if len(sp.lanes) < 2 {
		t.Skipf("one spawner on a host with %d processors", runtime.NumCPU())
	}
	key := initKey{uid: uid, gid: gid}
	first, err := startInit(sp, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer first.discard()
	// The first request went to the first spawner, which is free; held
	// now, it stands for one in the middle of a clone.
	busy := sp.lanes[0]
	busy.mu.Lock()
	second, err := startInit(sp, key, 0)
	busy.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer second.discard()
	if a, b := parentOf(t, first.proc.pid), parentOf(t, second.proc.pid); a == b {
		t.Errorf("both inits were cloned by spawner %d", a)
	}
}

// parentOf is the parent pid of process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PPid:\s*(\d+)$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no PPid in %s", status)
	}
	ppid, _ := strconv.Atoi(string(m[1]))
	return ppid
}

// The inits run on in the spawner's clones, never executing the binary as
// the sandbox uid, so one it may not read starts them all the same; each
// holds the setup capabilities alone and no fd of the spawner's.
func TestInitsRunInTheSpawnersClones(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the init must be unreadable to the sandbox uid only")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, initBinary)
	b, err := os.ReadFile(initBinaryPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o700); err != nil {
		t.Fatal(err)
	}
	uid, gid := sandboxIdentity()
	ip, err := startInit(newSpawner(path), initKey{uid: uid, gid: gid, namespaces: true}, 0)
	if err != nil {
		t.Fatalf("init the sandbox uid %d may not execute: %v", uid, err)
	}
	defer ip.discard()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ip.proc.pid))
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, c := range initCapabilities {
		want |= 1 << c
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		m := regexp.MustCompile(`(?m)^` + set + `:\s*([0-9a-f]+)$`).FindSubmatch(status)
		if m == nil {
			t.Fatalf("no %s in %s", set, status)
		}
		got, _ := strconv.ParseUint(string(m[1]), 16, 64)
		if w := map[bool]uint64{true: want}[set == "CapPrm" || set == "CapEff"]; got != w {
			t.Errorf("init's %s is %#x, want %#x", set, got, w)
		}
	}
	// Fds 0 to 5 are its stdio and its session's; beyond them the init
	// may hold only what it opened itself: no socket, pipe or anonymous
	// inode of the spawner's. An fs context is the init's own, open while
	// it mounts its tmpfs before the plan comes (read here at any moment
	// of that); the spawner opens none.
	fdDir := fmt.Sprintf("/proc/%d/fd/", ip.proc.pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, e := range ents {
		if n, _ := strconv.Atoi(e.Name()); n <= 5 {
			held++
			continue
		}
		if l, err := os.Readlink(fdDir + e.Name()); err == nil && l != "anon_inode:[fscontext]" && regexp.MustCompile(`^(socket|pipe|anon_inode):`).MatchString(l) {
			t.Errorf("init holds fd %s, %s, not one of its session's", e.Name(), l)
		}
	}
	if held != 6 {
		t.Errorf("init holds %d of fds 0 to 5, want its stdio and plan, report and pass fds", held)
	}
}

// A clone copies an fd table as large as the highest fd its parent has
// open: an init would keep one of 256 entries for as long as its session
// lasts if the spawner kept the fds the daemon was started with (a shell's
// 251, say). The spawner closes them.
func TestInitsKeepASmallFdTable(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	// Without close-on-exec, as a daemon inherits it, and above the 64
	// fds a process's own table holds.
	high, err := unix.FcntlInt(uintptr(p[1]), unix.F_DUPFD, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(high)
	uid, gid := sandboxIdentity()
	sp := newSpawner(initBinaryPath(t))
	defer func() {
		for _, l := range sp.lanes {
			l.mu.Lock()
			if l.sock != nil {
				l.stop()
			}
			l.mu.Unlock()
		}
	}()
	ip, err := startInit(sp, initKey{uid: uid, gid: gid, namespaces: true}, 0)
	if err != nil {
		t.Skipf("this host cannot start a namespaced init: %v", err)
	}
	defer ip.discard()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ip.proc.pid))
	if err != nil {
		t.Fatal(err)
	}
	if n := statusKB(string(status), "FDSize:"); n <= 0 || n > strconv.IntSize {
		t.Errorf("the init's fd table has %d entries, want the %d of its own block", n, strconv.IntSize)
	}
}

// An init that ends is reaped by the spawner then, not at its next
// request: no zombie is left while the daemon launches nothing.
func TestSpawnerReapsInitsAsTheyEnd(t *testing.T) {
	uid, gid := sandboxIdentity()
	sp := newSpawner(initBinaryPath(t))
	ip, err := startInit(sp, initKey{uid: uid, gid: gid}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pid := ip.proc.pid
	ip.discard()
	// discard returns once the init has ended; the test's timeout catches
	// a zombie that stays.
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] != "Z" {
			// The pid was reused by an unrelated process: the init was
			// reaped.
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSpawnFailureBlamesWhatFailed(t *testing.T) {
	ns := initKey{namespaces: true, netns: true}
	for _, errno := range []syscall.Errno{unix.EMFILE, unix.ENFILE, unix.EAGAIN, unix.ENOMEM} {
		err := spawnFailure(&spawnError{stage: 1, errno: errno}, ns)
		var ue *launcher.Unenforceable
		if !errors.Is(err, launcher.ErrHostResources) || errors.As(err, &ue) || !errors.Is(err, errno) {
			t.Errorf("%v: got %v, want a host-resources error, not a refusal", errno, err)
		}
		if !strings.Contains(err.Error(), "clone: "+errno.Error()) {
			t.Errorf("%v: %q does not name the stage that failed", errno, err)
		}
	}
	// The spawner killed the init whose pidfd it could not pass: fds in
	// flight or memory, not the namespaces.
	for _, errno := range []syscall.Errno{unix.ETOOMANYREFS, unix.ENOBUFS, unix.ENOMEM} {
		err := spawnFailure(&spawnError{stage: spawnStageReply, errno: errno}, ns)
		var ue *launcher.Unenforceable
		if !errors.Is(err, launcher.ErrHostResources) || errors.As(err, &ue) || !strings.Contains(err.Error(), "reply: "+errno.Error()) {
			t.Errorf("reply %v: got %v, want a host-resources error naming the reply, not a refusal", errno, err)
		}
		// Only fds in flight count against LimitNOFILE.
		if strings.Contains(err.Error(), "LimitNOFILE") != (errno == unix.ETOOMANYREFS) || (errno != unix.ETOOMANYREFS && !strings.Contains(err.Error(), "memory")) {
			t.Errorf("reply %v: %q advises the wrong remedy", errno, err)
		}
	}
	// A pass an LSM refused is no shortage: no host-resources error, no
	// advice, and no refusal of the policy either.
	if err := spawnFailure(&spawnError{stage: spawnStageReply, errno: unix.EACCES}, ns); errors.Is(err, launcher.ErrHostResources) || strings.Contains(err.Error(), "memory") {
		t.Errorf("reply EACCES: got %v, want a plain error", err)
	} else if ue := (*launcher.Unenforceable)(nil); errors.As(err, &ue) {
		t.Errorf("reply EACCES: got %v, want no refusal", err)
	}
	var ue *launcher.Unenforceable
	if err := spawnFailure(&spawnError{stage: 1, errno: unix.EPERM}, ns); !errors.As(err, &ue) || ue.Field != "process" {
		t.Errorf("EPERM: got %v, want the namespaces refusal", err)
	}
}

// envEarlyFailure names what TestEarlySetupFailuresKeepTheirPlace's child
// process denies itself (a hostsim denial) before it launches.
const envEarlyFailure = "SANDBOXD_TEST_EARLY_FAILURE"

// An init puts its mount namespace on a tmpfs and brings its loopback up
// before its plan comes (ahead of its launch when prestarted). A failure
// of either is reported where the step stands in the plan's order, as a
// refusal naming it: the same refusal as when the init took the step after
// reading the plan.
func TestEarlySetupFailuresKeepTheirPlace(t *testing.T) {
	if deny := os.Getenv(envEarlyFailure); deny != "" {
		earlyFailureChild(t, deny)
		return
	}
	for _, c := range []struct{ deny, field, probe string }{
		{"loopback", "network.mode", "loopback up lo"},
		{"mount", "process", "make-rslave /"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestEarlySetupFailuresKeepTheirPlace$", "-test.v")
		cmd.Env = append(os.Environ(), envEarlyFailure+"="+c.deny, "WANT_FIELD="+c.field, "WANT_PROBE="+c.probe)
		out, err := cmd.CombinedOutput()
		switch {
		case strings.Contains(string(out), "--- SKIP"):
			t.Skipf("%s: %s", c.deny, out)
		case err != nil || !strings.Contains(string(out), "--- PASS"):
			t.Errorf("%s denied: %v\n%s", c.deny, err, out)
		}
	}
}

// earlyFailureChild probes the host, then denies itself deny, so that the
// spawner, started on the first launch, and its inits inherit the denial,
// and launches.
func earlyFailureChild(t *testing.T, deny string) {
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetNamespaces), InitPath: initBinaryPath(t)})
	if err != nil {
		t.Skipf("no namespaces set here: %v", err)
	}
	prog, err := hostsim.Program([]string{deny}, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if err := hostsim.Install(prog); err != nil {
		t.Skipf("cannot install the %s denial: %v", deny, err)
	}
	p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/true"))
	if err == nil {
		p.Wait()
		t.Fatalf("launched with %s denied", deny)
	}
	var u *launcher.Unenforceable
	if !errors.As(err, &u) || u.Field != os.Getenv("WANT_FIELD") || u.Probe != os.Getenv("WANT_PROBE") {
		t.Fatalf("with %s denied: %v (%+v); want a refusal of %s by %q", deny, err, u, os.Getenv("WANT_FIELD"), os.Getenv("WANT_PROBE"))
	}
}

// envPersonalityDenied marks the child process of
// TestLaunchesWherePersonalityIsDenied, and says whether it runs with
// ADDR_NO_RANDOMIZE.
const envPersonalityDenied = "SANDBOXD_TEST_PERSONALITY_DENIED"

// Where personality(2) is denied, queries included (a container's seccomp
// profile), the init refused every launch, though the spawner promised such
// a host launches on; it now refuses only when /proc shows the flag it
// cannot clear, ADDR_NO_RANDOMIZE.
func TestLaunchesWherePersonalityIsDenied(t *testing.T) {
	if norandom := os.Getenv(envPersonalityDenied); norandom != "" {
		personalityDeniedChild(t, norandom == "norandom")
		return
	}
	for _, mode := range []string{"random", "norandom"} {
		args := []string{os.Args[0], "-test.run", "^TestLaunchesWherePersonalityIsDenied$", "-test.v", "-test.count=1"}
		if mode == "norandom" {
			// Every thread of the child, as personality(2) sets only
			// the caller's.
			setarch, err := exec.LookPath("setarch")
			if err != nil {
				t.Logf("no setarch: %v", err)
				continue
			}
			args = append([]string{setarch, "-R"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), envPersonalityDenied+"="+mode)
		out, err := cmd.CombinedOutput()
		switch {
		case strings.Contains(string(out), "--- SKIP"):
			t.Skipf("%s: %s", mode, out)
		case err != nil || !strings.Contains(string(out), "--- PASS"):
			t.Errorf("%s, personality denied: %v\n%s", mode, err, out)
		}
	}
}

// personalityDeniedChild denies itself personality(2), so that the
// spawner, started on the first launch, and its inits inherit the denial,
// and launches in each mechanism set.
func personalityDeniedChild(t *testing.T, norandom bool) {
	b, err := os.ReadFile("/proc/self/personality")
	if err != nil {
		t.Fatal(err)
	}
	pers, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 32)
	if err != nil || (pers&addrNoRandomize != 0) != norandom {
		t.Fatalf("personality %q (%v), want ADDR_NO_RANDOMIZE %v", b, err, norandom)
	}
	uid, gid := sandboxIdentity()
	var sets []*setBackend
	for _, set := range []MechanismSet{SetNamespaces, SetLandlock} {
		b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(set), InitPath: initBinaryPath(t)})
		if err != nil {
			t.Logf("no %s set here: %v", set, err)
			continue
		}
		sets = append(sets, &setBackend{set, b})
	}
	if len(sets) == 0 {
		t.Skip("no mechanism set here")
	}
	prog, err := hostsim.Program([]string{"personality"}, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if err := hostsim.Install(prog); err != nil {
		t.Skipf("cannot install the personality denial: %v", err)
	}
	for _, bf := range sets {
		p, err := bf.b.Start(context.Background(), testSpec(t, nil, "/bin/true"))
		if norandom {
			if err == nil {
				p.Wait()
				t.Errorf("%s: launched with ADDR_NO_RANDOMIZE that may not be cleared", bf.set)
			} else if u := (*launcher.Unenforceable)(nil); !errors.As(err, &u) || u.Probe != "personality" {
				t.Errorf("%s: %v, want a refusal by personality", bf.set, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: a launch with personality denied: %v", bf.set, err)
			continue
		}
		if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
			t.Errorf("%s: /bin/true with personality denied: %+v, %v", bf.set, st, err)
		}
	}
}

type setBackend struct {
	set MechanismSet
	b   launcher.Backend
}

// The report lines read without encoding/json decode as encoding/json
// decodes them, and a line that only looks like one goes through it.
func TestQuickReportDecodesAsEncodingJSON(t *testing.T) {
	for _, line := range []string{
		`{"type":"started"}`, `{"type":"exit"}`, `{"type":"exit","code":3}`, `{"type":"exit","signal":9}`,
		`{"type":"exit","code":-1,"signal":15}`, `{"type":"exit","code":2147483647}`, `{"type":"exit","code":-0}`,
	} {
		m, ok := quickReport([]byte(line + "\n"))
		var want sandboxinit.Message
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		if !ok || m != want {
			t.Errorf("%s: %+v, %v; encoding/json: %+v", line, m, ok, want)
		}
	}
	for _, line := range []string{
		`{"type":"started"}`, `{"type":"exit","code":03}`, `{"type":"exit","code":}`, `{"type":"exit","code":1,"code":2}`,
		`{"type":"exit","signal":9,"code":3}`, `{"type":"exit","code":99999999999999999999}`, `{"type":"exit" }`,
		`{"type":"started","detail":"x"}`, `{"type":"exit","code":1.5}`,
	} {
		nl := "\n"
		if line == `{"type":"started"}` {
			nl = ""
		}
		if m, ok := quickReport([]byte(line + nl)); ok {
			t.Errorf("%q read as %+v, not by encoding/json", line+nl, m)
		}
	}
}

func FuzzQuickReport(f *testing.F) {
	f.Add([]byte(`{"type":"exit","code":3,"signal":9}` + "\n"))
	f.Add([]byte(`{"type":"started"}` + "\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, ok := quickReport(line)
		if !ok {
			return
		}
		var want sandboxinit.Message
		if err := json.Unmarshal(line, &want); err != nil || m != want {
			t.Errorf("%q: %+v; encoding/json: %+v, %v", line, m, want, err)
		}
	})
}

// processCPU is the CPU time this process has used, user and system, in
// nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// The idle init runs on a thread-local stack whose lowest page is a guard:
// running off the stack's end faults instead of overwriting what lies
// below it.
func TestIdleInitStackHasAGuardPage(t *testing.T) {
	for _, set := range MechanismSets {
		t.Run(string(set), func(t *testing.T) {
			b := backendFor(t, set)
			if sf := set.check(&sandboxdv1.Policy{}, b.(*backend).host, false); sf != nil {
				t.Skipf("this host cannot run the %s set: %s", set, sf.found)
			}
			p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/sleep", "60"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { p.Kill(); p.Wait() }()
			// The init drops its vDSO as it goes idle, once its command
			// has run for a moment.
			var maps []byte
			deadline := time.Now().Add(10 * time.Second)
			for {
				if maps, err = os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.Pid())); errors.Is(err, os.ErrPermission) {
					t.Skipf("the init's mappings are not this user's to read: it is not dumpable (%v)", err)
				} else if err != nil {
					t.Fatalf("the init's mappings: %v", err)
				}
				if !strings.Contains(string(maps), "[vdso]") || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The init waits in the idle stack (above the guard), whose
			// pages, then the C library's thread-local variables, follow
			// the guard in one writable mapping; where the init's
			// registers can be read, its stack pointer is there.
			const idleStack = 15*4096 + 0xE00
			sp := uint64(0)
			if sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", p.Pid())); err == nil {
				if f := strings.Fields(string(sc)); len(f) == 9 {
					sp, _ = strconv.ParseUint(strings.TrimPrefix(f[7], "0x"), 16, 64)
				}
			}
			type mapping struct {
				lo, hi uint64
				perms  string
			}
			var ms []mapping
			for _, l := range strings.Split(string(maps), "\n") {
				var m mapping
				if _, err := fmt.Sscanf(l, "%x-%x %s", &m.lo, &m.hi, &m.perms); err == nil {
					ms = append(ms, m)
				}
			}
			for i := 0; i+1 < len(ms); i++ {
				guard, stack := ms[i], ms[i+1]
				if guard.perms != "---p" || guard.hi-guard.lo != 4096 || stack.lo != guard.hi || stack.perms != "rw-p" || stack.hi-stack.lo < idleStack {
					continue
				}
				if sp != 0 && (sp < stack.lo || sp >= stack.lo+idleStack) {
					t.Errorf("the init waits with its stack pointer at %#x, not in the idle stack %#x-%#x above the guard", sp, stack.lo, stack.lo+idleStack)
				}
				return
			}
			t.Errorf("the idle init has no inaccessible page just below a writable idle stack; its mappings:\n%s", maps)
		})
	}
}

// envENOSPCDenial marks the child process of the tests that probe with a
// hostsim denial failing with ENOSPC, and names the denial.
const envENOSPCDenial = "SANDBOXD_TEST_ENOSPC_DENIAL"

// probeWithENOSPC runs the calling test again in a child that denies itself
// what denial takes away with ENOSPC, and returns, in that child, what the
// probe found; in the parent it reports the child's outcome and returns nil.
func probeWithENOSPC(t *testing.T, denial string) *HostProbe {
	t.Helper()
	if os.Getenv(envENOSPCDenial) == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envENOSPCDenial+"="+denial)
		out, err := cmd.CombinedOutput()
		switch {
		case strings.Contains(string(out), "--- SKIP"):
			t.Skipf("%s", out)
		case err != nil || !strings.Contains(string(out), "--- PASS"):
			t.Errorf("probe with %s denied with ENOSPC: %v\n%s", denial, err, out)
		}
		return nil
	}
	prog, err := hostsim.Program([]string{os.Getenv(envENOSPCDenial)}, unix.ENOSPC)
	if err != nil {
		t.Fatal(err)
	}
	if err := hostsim.Install(prog); err != nil {
		t.Skipf("cannot install the %s denial: %v", denial, err)
	}
	uid, gid := sandboxIdentity()
	return ProbeHost(context.Background(), "/proc/self/exe", uid, gid)
}

// clone(CLONE_NEWUSER) fails with ENOSPC when no more user namespaces may
// be made (user.max_user_namespaces reached or 0, or 32 nested), and the
// probe and the refusal said "no space left on device", which sent an
// operator of a rootless daemon, falling back to the landlock set, to the
// disks. The child denies itself user namespaces with ENOSPC (hostsim)
// and probes.
func TestNoUserNamespaceLeftIsNoFullDisk(t *testing.T) {
	const want = "no more user namespaces"
	// Which limits it names is read from this host's /proc/sys/user: a
	// limit of 0 here is named alone. The errno's own text stays, after
	// the explanation.
	if err := namespaceRefusal(&spawnError{stage: 1, errno: unix.ENOSPC}, true); !strings.Contains(err.Error(), "not a full filesystem") ||
		!strings.Contains(err.Error(), "user.max_") {
		t.Errorf("the refusal of a clone that got ENOSPC: %q, want it to name a limit of namespaces, not a full disk", err)
	}
	h := probeWithENOSPC(t, "userns")
	if h == nil {
		return
	}
	for _, r := range h.Results {
		if r.Name != PrimUserNS {
			continue
		}
		if r.Errno != unix.ENOSPC || !strings.Contains(r.Detail, want) || strings.Contains(r.Detail, "no space left") {
			t.Errorf("the user namespace probe found %v: %q, want ENOSPC saying %q, not a full disk", r.Errno, r.Detail, want)
		}
		return
	}
	t.Errorf("no %s probe in %+v", PrimUserNS, h.Results)
}

// ENOSPC from a step of a probe child that did start (open_tree past
// fs.mount-max) is that step's: the probe blamed it on the namespace
// limits too.
func TestProbeStepENOSPCIsNotANamespaceLimit(t *testing.T) {
	h := probeWithENOSPC(t, "mount")
	if h == nil {
		return
	}
	for _, r := range h.Results {
		if r.Name != PrimMounts {
			continue
		}
		if r.Errno != unix.ENOSPC || !strings.Contains(r.Detail, "open_tree") || strings.Contains(r.Detail, "namespaces") {
			t.Errorf("the mount probe, open_tree denied with ENOSPC, found %v: %q, want open_tree's ENOSPC as is", r.Errno, r.Detail)
		}
		return
	}
	t.Errorf("no %s probe in %+v", PrimMounts, h.Results)
}

// ENOSPC from a clone may come from the limit of any kind of namespace it
// makes; the refusal named only the user namespaces' limit.
func TestNamespacesExhaustedNamesTheLimits(t *testing.T) {
	dir := t.TempDir()
	set := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	set("max_user_namespaces", "100")
	set("max_mnt_namespaces", "0")
	set("max_pid_namespaces", "50")
	set("max_net_namespaces", "70")
	const flags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID
	got := namespacesExhausted(flags, dir)
	if !strings.Contains(got, "user.max_mnt_namespaces is 0") || strings.Contains(got, "max_user_namespaces") || strings.Contains(got, "max_net") {
		t.Errorf("with mount namespaces off: %q, want it to name user.max_mnt_namespaces is 0 and no other limit", got)
	}
	set("max_mnt_namespaces", "60")
	got = namespacesExhausted(flags, dir)
	for _, w := range []string{"user.max_user_namespaces is 100", "user.max_mnt_namespaces is 60", "user.max_pid_namespaces is 50", "32 pid namespaces deep", "not a full filesystem"} {
		if !strings.Contains(got, w) {
			t.Errorf("with every limit above 0: %q, want it to say %q", got, w)
		}
	}
	if strings.Contains(got, "max_net") {
		t.Errorf("with no CLONE_NEWNET: %q names the net namespaces' limit", got)
	}
	if got := namespacesExhausted(unix.CLONE_NEWUSER, dir); !strings.Contains(got, "no more user namespaces") || strings.Contains(got, "pid") {
		t.Errorf("for clone(CLONE_NEWUSER): %q, want it to say no more user namespaces, and nothing of pid namespaces", got)
	}
}
