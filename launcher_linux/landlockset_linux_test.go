package launcherlinux

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"golang.org/x/sys/unix"
)

// landlockBackend is the backend forced to the namespace-less set; a kernel
// without what that set needs cannot run these tests, and says so.
func landlockBackend(t *testing.T) *backend {
	t.Helper()
	b := backendFor(t, SetLandlock).(*backend)
	if sf := SetLandlock.check(&sandboxdv1.Policy{}, b.host, false); sf != nil {
		t.Skipf("this host cannot run the landlock set: %s (%s)", sf.found, sf.mechanism)
	}
	return b
}

func TestLandlockSetStartsConfinedCommand(t *testing.T) {
	b := landlockBackend(t)
	host, _ := os.Hostname()
	out, serr, st := runWith(t, b, nil, "/bin/sh", "-c", "ipcmk -M 4096 >/dev/null 2>&1 || echo sysv-denied; id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status; hostname; echo x > /var/tmp/sandboxd-ll-probe; echo rc=$?; ls /proc | grep -c '^[0-9]' >/dev/null && echo sees-proc")
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	uid, _ := sandboxIdentity()
	for _, want := range []string{strconv.Itoa(int(uid)) + "\n", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", host, "rc=2", "sysv-denied"} {
		if !strings.Contains(out+serr, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestLandlockSetFilesystemAndNetwork(t *testing.T) {
	b := landlockBackend(t)
	w := hostDir(t, 0o777)
	other := hostDir(t, 0o777)
	os.MkdirAll(w+"/d", 0o777)
	os.Chmod(w+"/d", 0o777)
	secretDir := hostDir(t, 0o755)
	os.WriteFile(secretDir+"/key", []byte("k"), 0o644)
	os.WriteFile(secretDir+"/open", []byte("o"), 0o644)
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, Deny: []string{secretDir + "/key"}}}
	script := `echo a > ` + w + `/d/f && echo write-ok
echo b > ` + other + `/f || echo outside-denied
truncate -s 0 /etc/hostname 2>/dev/null || echo truncate-denied
cat ` + secretDir + `/key || echo deny-denied
cat ` + secretDir + `/open && echo sibling-ok
ln ` + secretDir + `/open ` + w + `/hard 2>/dev/null || echo link-denied
echo x > /dev/null && echo devnull-ok
`
	out, serr, st := runWith(t, b, pol, "/bin/sh", "-c", script)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, want := range []string{"write-ok", "outside-denied", "truncate-denied", "deny-denied", "sibling-ok", "link-denied", "devnull-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if _, err := os.Stat(other + "/f"); err == nil {
		t.Error("the sandbox wrote outside its write roots")
	}
}

func TestLandlockSetRefusesWhatLandlockCannotExpress(t *testing.T) {
	b := landlockBackend(t)
	w := hostDir(t, 0o777)
	os.MkdirAll(w+"/.git", 0o777)
	for field, fs := range map[string]*sandboxdv1.Filesystem{
		"filesystem.read_only": {Write: []string{w}, ReadOnly: []string{w + "/.git"}},
		"filesystem.deny":      {Write: []string{w}, Deny: []string{w + "/.env"}},
		"filesystem.write":     {Write: []string{"/"}},
	} {
		p, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: fs}, "/bin/true"))
		wantRefusal(t, p, err, field)
	}
}

// An orphaned background process must not outlive the session: without a
// pid namespace the init, as child subreaper, is what kills it.
func TestLandlockSetKillsOrphansAtExit(t *testing.T) {
	b := landlockBackend(t)
	out, _, st := runWith(t, b, nil, "/bin/sh", "-c", "(setsid sleep 1000 >/dev/null 2>&1 & echo $!) ; sleep 0.1")
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("no pid in %q", out)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("orphan %d survived the session", pid)
	}
}

func TestLandlockSetKillEndsTree(t *testing.T) {
	b := landlockBackend(t)
	dir := hostDir(t, 0o777)
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{dir}}}, "/bin/sh", "-c", "setsid sleep 1000 & echo $! > "+dir+"/pid; wait")
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for i := 0; i < 100 && pid == 0; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(20 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("background process did not start")
	}
	p.Kill()
	st, err := p.Wait()
	if err != nil || st.Signal == 0 && st.ExitCode == 0 {
		t.Fatalf("wait = %+v, %v", st, err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d survived Kill", pid)
	}
}

// TestInitEndsWithoutGetrandom runs a namespace-less session on a host whose
// getrandom fails, as a kernel without it or a container's seccomp profile
// makes it. The idle init, whose vDSO is unmapped by then, kills what its
// command left behind and reports the exit: the C library seeding its
// allocator from the clock instead would call into the unmapped vDSO. The
// orphans are more than the init's first page of pids holds.
func TestInitEndsWithoutGetrandom(t *testing.T) {
	landlockBackend(t)
	uid, gid := sandboxIdentity()
	be, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetLandlock), InitPath: initBinaryPath(t)})
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*backend)
	t.Cleanup(func() { b.Close() })
	type started struct {
		p   launcher.Process
		err error
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	spec := testSpec(t, nil, "/bin/sh", "-c", "i=0; while [ $i -lt 1100 ]; do sleep 1000 >/dev/null & echo $!; i=$((i+1)); done")
	spec.Stdio.Stdout = outW
	got := make(chan started)
	go func() {
		// The spawner, forked by this launch's first spawn from this
		// thread, inherits its filter, and so do its inits. The thread
		// ends with the goroutine, filter and all.
		runtime.LockOSThread()
		if err := refuseSyscall(unix.SYS_GETRANDOM); err != nil {
			got <- started{err: err}
			return
		}
		p, err := b.Start(context.Background(), spec)
		got <- started{p, err}
	}()
	s := <-got
	outW.Close()
	if s.err != nil {
		t.Fatal(s.err)
	}
	out, _ := readAll(outR)
	st, err := s.p.Wait()
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("Wait = %+v, %v; want exit code 0", st, err)
	}
	pids := strings.Fields(out)
	if len(pids) != 1100 {
		t.Fatalf("the command started %d orphans, want 1100", len(pids))
	}
	for _, f := range pids {
		if pid, _ := strconv.Atoi(f); syscall.Kill(pid, 0) == nil {
			t.Errorf("orphan %d survived the session", pid)
		}
	}
}

// refuseSyscall makes system call nr fail with ENOSYS on this thread and
// what it starts, as on a kernel without it.
func refuseSyscall(nr uint32) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	filters := []unix.SockFilter{
		{Code: bpfLdAbsW, K: 0},
		{Code: bpfJeqK, Jt: 0, Jf: 1, K: nr},
		{Code: bpfRetK, K: retErrno | uint32(unix.ENOSYS)},
		{Code: bpfRetK, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}

// A write root swapped for a symlink between the daemon's check of the
// policy and the init's Landlock rule must not move the grant to the
// symlink's target: another process of the user, writing the root's
// parent, exchanges the two while sessions launch.
func TestLandlockSetRuleDoesNotFollowASwappedSymlink(t *testing.T) {
	b := landlockBackend(t)
	base := hostDir(t, 0o755)
	target := hostDir(t, 0o777)
	w, link := base+"/w", base+"/l"
	if err := os.Mkdir(w, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(w, 0o777)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	stop := repeatUntilStopped(func() {
		unix.Renameat2(unix.AT_FDCWD, w, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
	})
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}
	started := 0
	for i := 0; i < 200 && started < 40; i++ {
		// Refused, when the check saw the symlink, or failed at setup.
		if p, err := b.Start(context.Background(), testSpec(t, pol, "/bin/sh", "-c", "echo x > "+target+"/f")); err == nil {
			p.Wait()
			started++
		}
		if _, err := os.Lstat(target + "/f"); err == nil {
			break
		}
	}
	stop()
	if _, err := os.Lstat(target + "/f"); err == nil {
		t.Fatalf("a session granted write on %s, its write root swapped for a symlink to %s, wrote there", w, target)
	}
	t.Logf("%d sessions started", started)
}

// Looking argv0 up on PATH, or execing it by its path, the init must not
// tell a file in a deny path from none there: Landlock does not govern
// stat or access, and the command's own lookups of a deny path the daemon
// answers alike.
func TestLandlockSetPathLookupHidesDenyPath(t *testing.T) {
	b := landlockBackend(t)
	secret := hostDir(t, 0o755)
	if err := os.WriteFile(secret+"/id_rsa", []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{secret}}}
	errnos := map[string]syscall.Errno{}
	for _, name := range []string{"id_rsa", "absent", secret + "/id_rsa", secret + "/absent"} {
		spec := testSpec(t, pol, name)
		spec.Env = []string{"PATH=" + secret}
		p, err := b.Start(context.Background(), spec)
		if err == nil {
			p.Wait()
			t.Fatalf("%s started", name)
		}
		var ee *launcher.ExecError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v, want an exec error", name, err)
		}
		errnos[name] = ee.Errno
	}
	if errnos["id_rsa"] != errnos["absent"] {
		t.Errorf("a file in a deny path fails with %v, a missing one with %v: the lookup tells them apart", errnos["id_rsa"], errnos["absent"])
	}
	if a, b := errnos[secret+"/id_rsa"], errnos[secret+"/absent"]; a != b {
		t.Errorf("named by its path, a file in a deny path fails with %v, a missing one with %v: the exec tells them apart", a, b)
	}
}

// A cwd in a deny path is refused: Landlock does not govern chdir, so the
// command would start inside it. The daemon judges the path as the kernel
// resolves it (dot-dot, dot and doubled slashes); a symlink leading in, the
// init judges after its chdir.
func TestLandlockSetRefusesCwdInDenyPath(t *testing.T) {
	b := landlockBackend(t)
	base := hostDir(t, 0o755)
	secret := base + "/s"
	for _, d := range []string{secret + "/d", base + "/x"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret+"/d", base+"/l"); err != nil {
		t.Fatal(err)
	}
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{secret}}}
	for _, cwd := range []string{secret + "/d", base + "/x/../s/d", base + "//s/d", base + "/./s/d", base + "/l"} {
		spec := testSpec(t, pol, "/bin/true")
		spec.Cwd = cwd
		p, err := b.Start(context.Background(), spec)
		if err == nil {
			p.Wait()
			t.Errorf("started with its cwd %s in a deny path", cwd)
			continue
		}
		if cwd == base+"/l" {
			var ee *launcher.ExecError
			if !errors.As(err, &ee) {
				t.Errorf("cwd %s: Start = %v, want an exec error", cwd, err)
			}
			continue
		}
		var fe *policy.FieldError
		if !errors.As(err, &fe) || fe.Field != "filesystem.deny[0]" {
			t.Errorf("cwd %s: Start = %v, want a refusal naming filesystem.deny[0]", cwd, err)
		}
	}
}

// A deny path beneath a directory the sandbox may list but not search
// grants nothing there, and the launch proceeds: nothing beneath is
// reachable to the command either.
func TestLandlockSetDenyPathBeneathAnUnsearchableDirectory(t *testing.T) {
	b := landlockBackend(t)
	base := hostDir(t, 0o755)
	if err := os.MkdirAll(base+"/a/b/secret", 0o755); err != nil {
		t.Fatal(err)
	}
	// Not searchable even by its owner, who is the sandbox's uid when
	// the test does not run as root.
	if err := os.Chmod(base+"/a", 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(base+"/a", 0o755) })
	p, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{base + "/a/b/secret"}}}, "/bin/true"))
	if err != nil {
		t.Fatalf("Start = %v, want the command started", err)
	}
	if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
		t.Fatalf("Wait = %+v, %v; want exit code 0", st, err)
	}
}

// TestAbandonedLandlockInitTakesItsCommand: a launch given up on after the
// init started the command (a kill or timeout of a starting session) must
// not leave the command running: without a pid namespace, SIGKILL of the
// init alone would reparent it outside any session.
func TestAbandonedLandlockInitTakesItsCommand(t *testing.T) {
	b := landlockBackend(t)
	p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/sh", "-c", "sleep 600 & wait"))
	if err != nil {
		t.Fatal(err)
	}
	init := p.(*process).proc
	var tree []int
	for end := time.Now().Add(10 * time.Second); len(tree) < 2 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		tree = descendants(init.pid)[1:]
	}
	if len(tree) < 2 {
		t.Fatalf("the command and its sleep did not start: %v", tree)
	}
	t.Cleanup(func() {
		for _, pid := range tree {
			unix.Kill(pid, unix.SIGKILL)
		}
	})
	abandonInit(init, false)
	p.Wait()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var alive []int
		for _, pid := range tree {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("processes %v of the abandoned launch still run", alive)
		}
	}
}

// TestAbandonedLandlockLaunchTakesACommandBeingSetUp: a launch given up on
// while the command's process still sets itself up (a cwd on a slow network
// filesystem, a deny path beside very many entries) must not leave that
// process to exec once the init is gone: without a pid namespace, nothing
// but the init's end tells it. The test holds the process until the init
// is killed, which makes its setup last that long: from its start (the
// init dies before the process asks to die with it), and from its first
// system call after that (setpgid).
func TestAbandonedLandlockLaunchTakesACommandBeingSetUp(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the init is not dumpable, so only CAP_SYS_PTRACE traces it")
	}
	for name, until := range map[string]int{"from its start": -1, "from its setpgid": unix.SYS_SETPGID} {
		t.Run(name, func(t *testing.T) { abandonHeldCommand(t, until) })
	}
}

// abandonHeldCommand gives up on a launch whose command's process is held
// at the entry of system call until (-1: at its start) until its init is
// gone, then checks that the process does not run on.
func abandonHeldCommand(t *testing.T, until int) {
	uid, gid := sandboxIdentity()
	lb, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetLandlock), InitPath: initBinaryPath(t), Prestart: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := lb.(*backend)
	t.Cleanup(func() { drainPool(b.inits) })
	if sf := SetLandlock.check(&sandboxdv1.Policy{}, b.host, false); sf != nil {
		t.Skipf("this host cannot run the landlock set: %s (%s)", sf.found, sf.mechanism)
	}
	// The init is traced before the launch that takes it: one started
	// ahead, the only one there is.
	runTrue(t, b, testSpec(t, nil, "/bin/true"))
	init := readyPids(t, b.inits, initKey{uid: uid, gid: gid}, 1)[0]
	h, err := holdCommandOf(init, until)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.release)
	marker := fmt.Sprintf("sandboxd-abandoned-%d", os.Getpid())
	spec := testSpec(t, nil, "/bin/sh", "-c", "while :; do sleep 1; done", marker)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() {
		p, err := b.Start(ctx, spec)
		if err == nil {
			p.Kill()
			p.Wait()
		}
		started <- err
	}()
	var child int
	select {
	case child = <-h.child:
	case <-time.After(30 * time.Second):
		t.Fatalf("init %d did not start the command", init)
	}
	t.Cleanup(func() {
		if strings.Contains(argv(child), marker) {
			unix.Kill(child, unix.SIGKILL)
		}
	})
	cancel()
	select {
	case <-h.initGone:
	case <-time.After(10 * time.Second):
		t.Fatalf("the init %d of the abandoned launch still runs", init)
	}
	h.release()
	select {
	case err := <-started:
		if err == nil {
			t.Fatal("an abandoned launch started")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return for an abandoned launch")
	}
	for end := time.Now().Add(5 * time.Second); procState(child) != "" && procState(child) != "Z"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the abandoned launch's command %d runs on: %q", child, argv(child))
		}
	}
}

// heldCommand is the command's process of a traced init, held in the stop
// it starts in.
type heldCommand struct {
	child    chan int
	initGone chan struct{}
	release  func()
}

// holdCommandOf traces the init pid until it starts the command's
// process, holds that process at the entry of system call until (-1: in its
// first stop, before it runs any of the init's code), reports the init's
// end, and lets the process go on release, which may be called again (it
// kills an init still running).
func holdCommandOf(init, until int) (*heldCommand, error) {
	h := &heldCommand{child: make(chan int, 1), initGone: make(chan struct{})}
	seized, release, done := make(chan error), make(chan struct{}), make(chan struct{})
	h.release = sync.OnceFunc(func() {
		select {
		case <-h.initGone:
		default:
			// Not yet reaped by the tracer, so still this init's pid.
			unix.Kill(init, unix.SIGKILL)
		}
		close(release)
		<-done
	})
	go func() {
		defer close(done)
		// The tracer is this thread; never unlocked, it ends with the
		// goroutine and detaches what it still traces.
		runtime.LockOSThread()
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(init), 0, unix.PTRACE_O_TRACEVFORK|unix.PTRACE_O_TRACESYSGOOD, 0, 0)
		if errno != 0 {
			seized <- fmt.Errorf("seize init %d: %w", init, errno)
			return
		}
		seized <- nil
		child := 0
		for {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(init, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
				break
			}
			sig := 0
			if ws.TrapCause() == unix.PTRACE_EVENT_VFORK {
				msg, _ := unix.PtraceGetEventMsg(init)
				child = int(msg)
				unix.Wait4(child, nil, unix.WALL, nil)
				if until >= 0 {
					stepToSyscall(child, until)
				}
				h.child <- child
			} else if ws.StopSignal() != unix.SIGTRAP {
				sig = int(ws.StopSignal())
			}
			unix.PtraceCont(init, sig)
		}
		close(h.initGone)
		<-release
		if child != 0 && unix.PtraceDetach(child) != nil {
			unix.Wait4(child, nil, unix.WALL, nil)
		}
	}()
	if err := <-seized; err != nil {
		<-done
		return nil, err
	}
	return h, nil
}

// stepToSyscall lets the stopped tracee pid run to the entry of system call
// nr, and leaves it stopped there.
func stepToSyscall(pid, nr int) {
	sig := 0
	for {
		if unix.PtraceSyscall(pid, sig) != nil {
			return
		}
		sig = 0
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
			return
		}
		if ws.StopSignal() != unix.SIGTRAP|0x80 {
			if ws.StopSignal() != unix.SIGTRAP {
				sig = int(ws.StopSignal())
			}
			continue
		}
		// struct ptrace_syscall_info: op, then at 24 an entry's nr.
		var info [88]byte
		n, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GET_SYSCALL_INFO, uintptr(pid), uintptr(len(info)), uintptr(unsafe.Pointer(&info[0])), 0, 0)
		if errno == 0 && n >= 32 && info[0] == unix.PTRACE_SYSCALL_INFO_ENTRY && binary.NativeEndian.Uint64(info[24:]) == uint64(nr) {
			return
		}
	}
}

// argv is pid's command line, its arguments joined by spaces.
func argv(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// procState is the state letter of pid, "" if it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))[0]
}
