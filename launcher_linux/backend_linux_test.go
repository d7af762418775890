package launcherlinux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/initbuild"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	RunProbeIfRequested()
	if mode := os.Getenv(envConnectProbe); mode != "" {
		connectProbe(mode)
	}
	if os.Getenv(envForkBomb) != "" {
		forkBomb()
	}
	if mode := os.Getenv(envDenialProbe); mode != "" {
		denialProbe(mode)
	}
	if dir := os.Getenv(envDirentProbe); dir != "" {
		direntProbe(dir)
	}
	code := m.Run()
	initbuild.RemoveShared()
	os.Exit(code)
}

var (
	backendsMu sync.Mutex
	backends   = map[MechanismSet]launcher.Backend{}
)

// newBackend is the backend choosing its mechanism set; one per set is
// probed per test binary.
func newBackend(tb testing.TB) launcher.Backend { return backendFor(tb, "") }

func backendFor(tb testing.TB, set MechanismSet) launcher.Backend {
	tb.Helper()
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if b := backends[set]; b != nil {
		return b
	}
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(set), InitPath: initBinaryPath(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	backends[set] = b
	return b
}

func sandboxIdentity() (uint32, uint32) {
	if os.Getuid() == 0 {
		return 65533, 65533
	}
	return uint32(os.Getuid()), uint32(os.Getgid())
}

// testSpec runs argv under pol as the daemon would for this test's user:
// as that user, or as the default sandbox uid for root, with /dev/null as
// stdio.
func testSpec(tb testing.TB, pol *sandboxdv1.Policy, argv ...string) launcher.Spec {
	tb.Helper()
	uid, gid := sandboxIdentity()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { devnull.Close() })
	return launcher.Spec{
		Policy: policy.Normalize(pol), Argv: argv,
		Env: []string{"PATH=/usr/bin:/bin"}, UID: uid, GID: gid,
		Stdio: launcher.Stdio{Stdin: devnull, Stdout: devnull, Stderr: devnull},
	}
}

// hostDir is a fresh directory outside /tmp, which sandboxes do not share.
func hostDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantRefusal fails unless Start was refused with an Unenforceable for
// field ("" for any field); a started process is reaped first.
func wantRefusal(t *testing.T, p launcher.Process, err error, field string) {
	t.Helper()
	var u *launcher.Unenforceable
	if errors.As(err, &u) && (field == "" || u.Field == field) {
		return
	}
	if err == nil {
		p.Kill()
		p.Wait()
	}
	t.Fatalf("Start = %v, want a refusal naming %q", err, field)
}

// run starts argv under pol with pipes and returns stdout, stderr and status.
func run(t *testing.T, pol *sandboxdv1.Policy, argv ...string) (string, string, launcher.Status) {
	t.Helper()
	return runWith(t, newBackend(t), pol, argv...)
}

func runWith(t *testing.T, b launcher.Backend, pol *sandboxdv1.Policy, argv ...string) (string, string, launcher.Status) {
	t.Helper()
	out, serr, _, st, err := runSpec(t, b, testSpec(t, pol, argv...))
	if err != nil {
		t.Fatal(err)
	}
	return out, serr, st
}

// runSpec starts spec on b with its output piped back and waits for it:
// what it printed, the process, and how it ended.
func runSpec(t *testing.T, b launcher.Backend, spec launcher.Spec) (stdout, stderr string, p launcher.Process, st launcher.Status, waitErr error) {
	t.Helper()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	defer outR.Close()
	defer errR.Close()
	spec.Stdio.Stdout, spec.Stdio.Stderr = outW, errW
	p, err := b.Start(context.Background(), spec)
	outW.Close()
	errW.Close()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var out, serr bytes.Buffer
	done := make(chan struct{})
	go func() { out.ReadFrom(outR); close(done) }()
	serr.ReadFrom(errR)
	<-done
	st, waitErr = p.Wait()
	return out.String(), serr.String(), p, st, waitErr
}

func TestStartsConfinedCommand(t *testing.T) {
	out, serr, st := run(t, nil, "/bin/sh", "-c", "id; grep -E '^(Cap[A-Za-z]+|NoNewPrivs|Seccomp):' /proc/self/status; hostname; echo x > /etc/sandboxd-probe; echo rc=$?")
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 || st.Signal != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "sandbox", "rc=2", "Read-only file system"} {
		if !strings.Contains(out+serr, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestFilesystemPolicy(t *testing.T) {
	w := t.TempDir()
	// The sandbox uid of a root daemon must be able to reach the root.
	os.Chmod(filepath.Dir(w), 0o755)
	os.Chmod(w, 0o777)
	os.MkdirAll(w+"/.git", 0o777)
	os.MkdirAll(w+"/secret", 0o777)
	os.WriteFile(w+"/secret/key", []byte("k"), 0o666)
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{w},
		ReadOnly: []string{w + "/.git", w + "/sub/.git"},
		Deny:     []string{w + "/secret"},
	}}
	script := `cd ` + w + `
echo a > ok && echo write-ok
echo b > .git/x || echo git-denied
mkdir -p sub/.git/hooks 2>/dev/null || echo sub-git-denied
cat secret/key || echo secret-denied
mv .git g2 || echo rename-denied
echo c > /tmp/t && echo tmp-ok
`
	out, serr, st := run(t, pol, "/bin/sh", "-c", script)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, want := range []string{"write-ok", "git-denied", "sub-git-denied", "secret-denied", "rename-denied", "tmp-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if _, err := os.Stat(w + "/sub"); err == nil {
		t.Errorf("placeholder %s/sub left behind", w)
	}
}

// BenchmarkStartTrue measures one sandbox launch of /bin/true end to end:
// namespaces, mounts, the init, Landlock, seccomp, exec, exit.
func BenchmarkStartTrue(b *testing.B) {
	for _, set := range MechanismSets {
		b.Run(string(set), func(b *testing.B) { benchmarkStartTrue(b, set) })
	}
}

func benchmarkStartTrue(b *testing.B, set MechanismSet) {
	be := backendFor(b, set)
	spec := testSpec(b, nil, "/bin/true")
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
}

// BenchmarkProbeHost is what the host probe adds to the daemon's start.
func BenchmarkProbeHost(b *testing.B) {
	uid, gid := sandboxIdentity()
	for i := 0; i < b.N; i++ {
		ProbeHost(context.Background(), "/proc/self/exe", uid, gid)
	}
}

func TestStartGivesUpWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := newBackend(t).Start(ctx, testSpec(t, nil, "/bin/sleep", "60"))
	if err == nil {
		p.Kill()
		p.Wait()
		t.Fatal("Start with a cancelled context started the command")
	}
}

func TestHostMountAfterLaunchStaysOutside(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting on the host to test propagation needs root; the sandbox side is the same for every daemon")
	}
	dir := hostDir(t, 0o755)
	sub := dir + "/sub"
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// A shared mount, as systemd makes every mount: new mounts beneath it
	// propagate to its peers and slaves.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	// Made first: run alone, the test would otherwise build the init
	// within those 300 ms, and launch after the host's mount.
	b := newBackend(t)
	mounted := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		err := unix.Mount("tmpfs", sub, "tmpfs", 0, "mode=0777")
		if err == nil {
			err = os.WriteFile(sub+"/marker", []byte("host"), 0o666)
		}
		mounted <- err
	}()
	out, serr, st := runWith(t, b, nil, "/bin/sh", "-c", "sleep 1; cat "+sub+"/marker 2>&1 || echo not-seen")
	if err := <-mounted; err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 || !strings.Contains(out, "not-seen") {
		t.Errorf("a host mount made after launch is visible inside: %q %q %+v", out, serr, st)
	}
}

func TestUnreachableDenyPathTheSandboxCouldOpenIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("making a directory owned by the sandbox uid with a group outside its user namespace needs root")
	}
	dir := hostDir(t, 0o755)
	// Runs before hostDir's removal, which needs to enter priv.
	t.Cleanup(func() { os.Chmod(dir+"/priv", 0o700) })
	secret := dir + "/priv/secret"
	os.Mkdir(dir+"/priv", 0o700)
	os.WriteFile(secret, []byte("secret"), 0o644)
	// Owned by the sandbox uid, so the command could chmod it open; a group
	// the sandbox's user namespace does not map, so the init's capabilities
	// do not reach it.
	os.Chown(dir+"/priv", 65533, 100)
	os.Chmod(dir+"/priv", 0)
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{secret}}}
	p, err := newBackend(t).Start(context.Background(), testSpec(t, pol, "/bin/sh", "-c", "chmod 700 "+dir+"/priv && cat "+secret))
	wantRefusal(t, p, err, "filesystem.deny")
}

func TestSandboxUIDEqualToOverflowCannotVouchForUnreachable(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a root-only directory to hide a deny path behind needs root")
	}
	dir := hostDir(t, 0o700)
	os.WriteFile(dir+"/secret", []byte("secret"), 0o600)
	b := newBackend(t)
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{dir + "/secret"}}}, "/bin/true")
	// As 65533 the root-owned directory is plainly not the sandbox's: the
	// deny path is out of reach and the session runs.
	spec.UID, spec.GID = 65533, 65533
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("as uid 65533: %v", err)
	}
	p.Wait()
	// As 65534, root's directory shows as the sandbox's own: refuse.
	spec.UID, spec.GID = 65534, 65534
	p, err = b.Start(context.Background(), spec)
	wantRefusal(t, p, err, "")
}

// TestPlaceholderOutlivesTheSessionThatMadeIt: two sessions share a
// carve-out that did not exist; the first one ending must not strip the
// second one's protection (removing the placeholder from the host would
// detach the second session's read-only mount).
func TestPlaceholderOutlivesTheSessionThatMadeIt(t *testing.T) {
	w := hostDir(t, 0o777)
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, ReadOnly: []string{w + "/.git"}}}
	b := newBackend(t)
	start := func(script string, out *os.File) launcher.Process {
		spec := testSpec(t, pol, "/bin/sh", "-c", script)
		if out != nil {
			spec.Stdio.Stdout, spec.Stdio.Stderr = out, out
		}
		p, err := b.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	outR, outW, _ := os.Pipe()
	long := start("sleep 1; mkdir "+w+"/.git/hooks 2>/dev/null && echo WROTE || echo denied", outW)
	outW.Close()
	short := start("true", nil)
	if _, err := short.Wait(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(outR)
	long.Wait()
	if !strings.Contains(out.String(), "denied") {
		t.Errorf("the carve-out became writable once the other session ended: %q", out.String())
	}
	if _, err := os.Stat(w + "/.git"); err == nil {
		t.Errorf("placeholder %s/.git left behind after both sessions", w)
	}
}

func TestWriteRootInsideProcOrSysIsRejected(t *testing.T) {
	b := newBackend(t)
	for _, w := range []string{"/proc/1", "/proc", "/sys/kernel"} {
		_, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/true"))
		var fe *policy.FieldError
		if !errors.As(err, &fe) || fe.Field != "filesystem.write[0]" {
			t.Errorf("write root %s: Start = %v, want a FieldError naming filesystem.write[0]", w, err)
		}
	}
}

func TestDaemonSocketUnderHostTmpDoesNotStopSessions(t *testing.T) {
	// The rootless fallback socket lives in /tmp/sandboxd-UID, which the
	// sandbox's private /tmp does not show: nothing to hide, nothing to fail.
	sock := filepath.Join(t.TempDir(), "sandboxd.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, nil, "/bin/true")
	spec.HideSockets = []string{sock}
	p, err := newBackend(t).Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// Concurrent sessions share a missing carve-out's placeholder, which the
// last of them removes: the symlink check of one starting as another ends
// must not fail on the path vanishing between its own two looks.
func TestSymlinkCheckSurvivesAVanishingPlaceholder(t *testing.T) {
	w := hostDir(t, 0o755)
	defer repeatUntilStopped(func() {
		os.Mkdir(w+"/.git", 0o755)
		os.Remove(w + "/.git")
	})()
	for range 20000 {
		if err := noSymlink("filesystem.read_only[0]", w+"/.git"); err != nil {
			t.Fatal(err)
		}
	}
}

// The identity files are read again once either host file changes, even
// to the same size within the same second: a launch never plans from a
// passwd the host has since rewritten.
func TestIdentityFilesFollowTheHostsFiles(t *testing.T) {
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(passwd, "root:x:0:0::/root:/bin/sh\nxx:x:1001:1001::/:/bin/sh\n")
	write(group, "root:x:0:\n")
	var c identityCache
	p1, g1 := identityFilesAt(&c, passwd, group, 1000, 1000)
	if !strings.Contains(p1, ":1000:1000:sandboxd sandbox:") || !strings.Contains(g1, ":1000:") {
		t.Fatalf("no entry for 1000 in %q, %q", p1, g1)
	}
	if p2, g2 := identityFilesAt(&c, passwd, group, 1000, 1000); p2 != p1 || g2 != g1 {
		t.Errorf("unchanged files planned differently: %q, %q", p2, g2)
	}
	write(passwd, "root:x:0:0::/root:/bin/sh\nxx:x:1000:1000::/:/bin/sh\n")
	if p3, _ := identityFilesAt(&c, passwd, group, 1000, 1000); p3 != "" {
		t.Errorf("the host's passwd now names uid 1000, yet the sandbox gets %q", p3)
	}
	if p4, _ := identityFilesAt(&c, passwd, group, 1001, 1000); !strings.Contains(p4, ":1001:1000:sandboxd sandbox:") {
		t.Errorf("uid 1001, which the host no longer names, gets %q", p4)
	}
	if _, g5 := identityFilesAt(&c, passwd, group, 1000, 1002); !strings.Contains(g5, ":1002:") {
		t.Errorf("gid 1002 got %q, no entry of its own", g5)
	}
}

// The spawner, and each init as a clone of it, runs without address-space
// randomization (spawner.c); the command must not: its execve comes with
// the personality the init restores, on both exec paths.
func TestCommandKeepsAddressRandomization(t *testing.T) {
	const probe = "/bin/cat"
	out, serr, st := run(t, nil, probe, "/proc/self/personality")
	if st.ExitCode != 0 {
		t.Fatalf("status %+v: %s", st, serr)
	}
	wantRandomized(t, "exec", out)
	if ll := backendFor(t, SetLandlock).(*backend); SetLandlock.check(&sandboxdv1.Policy{}, ll.host, false) == nil {
		out, serr, st = runWith(t, ll, nil, probe, "/proc/self/personality")
		if st.ExitCode != 0 {
			t.Fatalf("landlock set: status %+v: %s", st, serr)
		}
		wantRandomized(t, "exec on the landlock set", out)
	} else {
		t.Log("this host cannot run the landlock set: its exec path is not checked")
	}

	wantRandomized(t, "terminal", runTerminal(t, newBackend(t), testSpec(t, nil, probe, "/proc/self/personality")))
}

// runTerminal runs spec on b with a terminal of 80x24, and returns what the
// terminal showed once the command exited 0.
func runTerminal(t *testing.T, b launcher.Backend, spec launcher.Spec) string {
	t.Helper()
	spec.Stdio = launcher.Stdio{Terminal: true, Rows: 24, Cols: 80}
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var tty bytes.Buffer
	// The replica's last close shows as EIO on the master.
	io.Copy(&tty, p.Terminal())
	p.Terminal().Close()
	if st, err := p.Wait(); err != nil || st.ExitCode != 0 {
		t.Fatalf("%+v, %v\n%s", st, err, &tty)
	}
	return tty.String()
}

// addrNoRandomize is ADDR_NO_RANDOMIZE of <linux/personality.h>.
const addrNoRandomize = 0x0040000

func wantRandomized(t *testing.T, path, personality string) {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimSpace(personality), 16, 32)
	if err != nil {
		t.Fatalf("%s: /proc/self/personality read %q: %v", path, personality, err)
	}
	if v&addrNoRandomize != 0 {
		t.Errorf("%s: the command runs with personality %#x, ADDR_NO_RANDOMIZE set", path, v)
	}
}

// An idle init's address space is its text, data and .bss and a heap right
// after them, all in one 2 MiB: the PUD, PMD and one PTE page. A heap at a
// random distance, where a randomized spawner would put it, takes a fourth.
// The init keeps the name of the binary the spawner was started as, not
// "exe" of the /proc/self/exe the spawner re-executes itself through.
func TestIdleInitHasThreePageTablePages(t *testing.T) {
	// Where the personality may not be set, the spawner runs on
	// randomized. The probe's thread ends with its goroutine.
	settable := make(chan bool)
	go func() {
		runtime.LockOSThread()
		old, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
		if errno == 0 {
			_, _, errno = unix.RawSyscall(unix.SYS_PERSONALITY, old|addrNoRandomize, 0, 0)
		}
		settable <- errno == 0
	}()
	if !<-settable {
		t.Skip("this host does not let a process set ADDR_NO_RANDOMIZE")
	}
	p, err := newBackend(t).Start(context.Background(), testSpec(t, nil, "/bin/sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Kill()
	pte := statusKB(idleStatus(t, p.Pid()), "VmPTE:")
	if want := 3 * os.Getpagesize() / 1024; pte <= 0 || pte > want {
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.Pid()))
		t.Errorf("idle init's VmPTE %d kB, want at most %d kB; its maps:\n%s", pte, want, maps)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(initBinaryPath(t))
	if len(name) > 15 {
		name = name[:15]
	}
	if got := strings.TrimSpace(string(comm)); got != name {
		t.Errorf("the init is named %q, want %q (the binary's name)", got, name)
	}
}

// An idle init writes one page of its own, the one holding its errno and
// the idle loop's stack: everything else it keeps is still the spawner's
// (the rseq area the kernel would write in its thread block is off, and
// the setup's pages are given back). Two pages showed here while the idle
// stack was in the .bss.
func TestIdleInitWritesOnePageOfItsOwn(t *testing.T) {
	p, err := newBackend(t).Start(context.Background(), testSpec(t, nil, "/bin/sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Kill()
	idleStatus(t, p.Pid())
	rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p.Pid()))
	if err != nil {
		t.Skipf("the init's memory: %v", err)
	}
	if got, want := statusKB(string(rollup), "Private_Dirty:"), os.Getpagesize()/1024; got < 0 || got > want {
		smaps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", p.Pid()))
		t.Errorf("the idle init has %d kB of private dirty pages, want at most %d kB; its smaps:\n%s", got, want, smaps)
	}
}

// idleStatus waits until the init pid is idle and returns its status. The
// init gives back its setup's memory, the main stack first, once the
// command has run for a while, and then waits (sleeps) until it ends. Its
// status, unlike its maps, a rootless caller may read.
func idleStatus(t *testing.T, pid int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		status := string(b)
		if statusKB(status, "VmStk:") == 0 && strings.Contains(status, "\nState:\tS") {
			return status
		}
		if time.Now().After(deadline) {
			t.Fatalf("the init did not go idle (no main stack, sleeping) in 10 s; its status:\n%s", status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle init holds its stdio and the pipe it reports the command's end
// on, nothing more: it takes the signals it forwards with sigtimedwait,
// where a signalfd would be a file kept open for the session's life.
func TestIdleInitHoldsOnlyItsStdioAndReport(t *testing.T) {
	p, err := newBackend(t).Start(context.Background(), testSpec(t, nil, "/bin/sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Kill()
	idleStatus(t, p.Pid())
	fdDir := fmt.Sprintf("/proc/%d/fd/", p.Pid())
	ents, err := os.ReadDir(fdDir)
	if errors.Is(err, fs.ErrPermission) {
		t.Skip("the init's fds are not this user's to read: it is not dumpable")
	}
	if err != nil {
		t.Fatal(err)
	}
	var held, beyond []string
	for _, e := range ents {
		l, err := os.Readlink(fdDir + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, e.Name()+" -> "+l)
		if n, _ := strconv.Atoi(e.Name()); n > 2 {
			beyond = append(beyond, l)
		}
	}
	if len(beyond) != 1 || !strings.HasPrefix(beyond[0], "pipe:") {
		t.Errorf("the idle init holds %s; want stdio and its report pipe", strings.Join(held, ", "))
	}
}

// statusKB is the figure of field in /proc/PID/status, -1 if it has none.
func statusKB(status, field string) int {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB")); err == nil {
				return n
			}
		}
	}
	return -1
}

// repeatUntilStopped runs change over and over on a goroutine of its own,
// racing what a test does meanwhile, until the function it returns is
// called, which waits for the last run to end.
func repeatUntilStopped(change func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			change()
		}
	}()
	return func() { close(quit); <-done }
}
