package launcherlinux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"golang.org/x/sys/unix"
)

// The environment of the test binary run inside a sandbox as the denial
// probe: what it does, and the directories it does it in.
const (
	envDenialProbe = "SANDBOXD_TEST_DENIAL_PROBE"
	envWriteRoot   = "SANDBOXD_TEST_WRITE_ROOT"
	envReadOnlyDir = "SANDBOXD_TEST_READ_ONLY_DIR"
	envPort        = "SANDBOXD_TEST_PORT"
	envUnixSocket  = "SANDBOXD_TEST_UNIX_SOCKET"
	envOpens       = "SANDBOXD_TEST_OPENS"
)

// denialProbe runs inside a sandbox. It prints its pid, then one
// "name=outcome" line per operation: "ok" or the errno it got.
func denialProbe(mode string) {
	fmt.Printf("pid=%d\n", os.Getpid())
	report := func(name string, err error) { fmt.Printf("%s=%s\n", name, outcome(err)) }
	switch mode {
	case "fs":
		fsProbe(report)
	case "connect":
		port, _ := strconv.Atoi(os.Getenv(envPort))
		report("tcp-blocking", blockingTCP(port))
		_, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		report("tcp-dial", err)
		_, err = net.DialTimeout("tcp", "10.1.2.3:80", time.Second)
		report("tcp-unreachable", err)
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		report("unix-socket", err)
		unixConnect := func(path string) error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		}
		report("unix-host", unixConnect(os.Getenv(envUnixSocket)))
		report("unix-missing", unixConnect("/var/run/nscd/socket-of-no-daemon"))
	case "socket":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		report("inet-socket", err)
	case "process":
		report("unshare", unix.Unshare(unix.CLONE_NEWUSER))
		report("ptrace", unix.PtraceAttach(1))
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&[]byte{'x'}[0])))
		report("tiocsti", errnoErr(errno))
		// clone3 with no arguments: ENOSYS from the filter, for libc to
		// fall back to clone; not a refusal of the policy.
		_, _, errno = unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
		report("clone3", errnoErr(errno))
	case "opens":
		openLoop(os.Getenv(envWriteRoot), os.Getenv(envOpens))
	case "stats", "chmods":
		metaLoop(os.Getenv(envDenialProbe), os.Getenv(envWriteRoot), os.Getenv(envOpens))
	}
	os.Exit(0)
}

// fsProbe makes write-intent calls in a directory the policy keeps
// read-only, by every way of naming it the sandbox has, and a few that
// the policy lets through.
func fsProbe(report func(string, error)) {
	w, ro := os.Getenv(envWriteRoot), os.Getenv(envReadOnlyDir)
	create := func(p string) error {
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	raw := func(nr uintptr, p string, args ...uintptr) error {
		b, _ := unix.BytePtrFromString(p)
		a := append([]uintptr{uintptr(unsafe.Pointer(b))}, args...)
		a = append(a, 0, 0)
		r, _, errno := unix.Syscall(nr, a[0], a[1], a[2])
		if errno == 0 && nr != nrMkdir {
			unix.Close(int(r))
		}
		runtime.KeepAlive(b)
		return errnoErr(errno)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, ro+"/o2", &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC, Mode: 0o644})
	if err == nil {
		unix.Close(fd)
	}
	report("openat2", err)
	// arm64 has none of these three.
	if present(nrOpen) {
		report("open", raw(nrOpen, ro+"/legacy", unix.O_WRONLY|unix.O_CREAT, 0o644))
		report("creat", raw(nrCreat, ro+"/creat", 0o644))
		report("mkdir", raw(nrMkdir, ro+"/legacydir", 0o755))
	}
	report("mkdirat", unix.Mkdir(ro+"/newdir", 0o755))
	report("symlinkat", unix.Symlink("x", ro+"/sl"))
	report("mknodat", unix.Mknod(ro+"/fifo", unix.S_IFIFO|0o644, 0))
	report("truncate", unix.Truncate(ro+"/file", 0))
	fd, err = unix.Open(ro+"/file", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	report("open-existing", err)
	fd, err = unix.Open(ro+"/file", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	report("read-only-open", err)
	report("renameat", unix.Rename(ro+"/file", ro+"/file2"))
	report("unlinkat", unix.Unlink(ro+"/file"))
	// Relative to the working directory, through /proc/self and
	// /proc/thread-self, through a symlink in the write root, and up from
	// the write root.
	if err := unix.Chdir(ro); err != nil {
		report("chdir", err)
	}
	report("relative", create("rel"))
	report("proc-self", create("/proc/self/cwd/viaproc"))
	report("thread-self", create("/proc/thread-self/cwd/viathread"))
	report("symlink-in-write-root", unix.Symlink(ro, w+"/toro"))
	report("through-symlink", create(w+"/toro/vialink"))
	report("dotdot", create(w+"/../"+filepath.Base(ro)+"/dotdot"))
	// Let through.
	report("write-root", create(w+"/ok"))
	// A pipe of its own, which it may open again.
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		report("pipe", err)
	}
	report("dev-fd", create("/dev/fd/"+strconv.Itoa(pipe[1])))
	report("proc-fd", create("/proc/self/fd/"+strconv.Itoa(pipe[1])))
}

// openLoop opens a file of dir for writing n times and prints the mean
// time one open and close took.
func openLoop(dir, n string) {
	count, _ := strconv.Atoi(n)
	p := dir + "/f"
	start := time.Now()
	for range count {
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			fmt.Printf("open=%s\n", outcome(err))
			os.Exit(1)
		}
		unix.Close(fd)
	}
	fmt.Printf("ns-per-open=%d\n", time.Since(start).Nanoseconds()/int64(max(count, 1)))
}

// metaLoop stats or chmods a file in dir n times and prints the time
// each took.
func metaLoop(what, dir, n string) {
	count, _ := strconv.Atoi(n)
	p := dir + "/f"
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		fmt.Printf("create=%s\n", outcome(err))
		os.Exit(1)
	}
	start := time.Now()
	for range count {
		var err error
		if what == "stats" {
			var st unix.Stat_t
			err = unix.Stat(p, &st)
		} else {
			err = unix.Chmod(p, 0o644)
		}
		if err != nil {
			fmt.Printf("%s=%s\n", what, outcome(err))
			os.Exit(1)
		}
	}
	fmt.Printf("ns-per-call=%d\n", time.Since(start).Nanoseconds()/int64(max(count, 1)))
}

// probeBinary is a copy of this test binary that the sandbox uid can run
// from outside the private /tmp.
func probeBinary(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return probe
}

// denials collects what a session records.
type denials struct {
	mu   sync.Mutex
	list []*sandboxdv1.Denial
}

func (d *denials) add(x *sandboxdv1.Denial) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, x)
}

func (d *denials) String() string {
	var b strings.Builder
	for _, x := range d.list {
		fmt.Fprintf(&b, "  %s %s %s %s pid %d host %d %q\n", x.GetField(), x.GetOperation(), x.GetTarget(), x.GetErrno(), x.GetPid(), x.GetHostPid(), x.GetCommand())
	}
	return b.String()
}

// runRecorded runs spec on b to the end and returns its output, the
// process and the refusals recorded.
func runRecorded(t *testing.T, b launcher.Backend, spec launcher.Spec) (string, string, launcher.Process, launcher.Status, *denials) {
	t.Helper()
	d := &denials{}
	spec.OnDenial = d.add
	out, serr, p, st, err := runSpec(t, b, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stdout:\n%sstderr:\n%srecorded:\n%s", out, serr, d)
	return out, serr, p, st, d
}

// bothSets runs f once per mechanism set this host can run.
func bothSets(t *testing.T, f func(t *testing.T, b launcher.Backend, set MechanismSet)) {
	t.Run("namespaces", func(t *testing.T) { f(t, newBackend(t), SetNamespaces) })
	t.Run("landlock", func(t *testing.T) { f(t, landlockBackend(t), SetLandlock) })
}

// wantObserved fails unless the session's report says each kind is
// observed or not, as want says.
func wantObserved(t *testing.T, p launcher.Process, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for _, s := range p.Enforcement().GetDenialSources() {
		if s.GetHow() == "" {
			t.Errorf("denial source %s: no how", s.GetKind())
		}
		got[s.GetKind()] = s.GetObserved()
	}
	for k, v := range want {
		if o, ok := got[k]; !ok || o != v {
			t.Errorf("denial source %s: observed %v (present %v), want %v", k, o, ok, v)
		}
	}
}

// landlockErrno is what the set's layers answer a write the policy
// refuses where no mount is read-only.
func refusedErrno(set MechanismSet) string {
	if set == SetLandlock {
		return "EACCES"
	}
	return "EROFS"
}

func TestDenialOfWriteOutsideWriteRoots(t *testing.T) {
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		spec := testSpec(t, nil, "/bin/sh", "-c", "echo $$; echo x > /etc/blocked")
		out, _, p, st, d := runRecorded(t, b, spec)
		if st.ExitCode == 0 {
			t.Errorf("the write succeeded: %+v", st)
		}
		if len(d.list) != 1 {
			t.Fatalf("recorded %d refusals, want 1", len(d.list))
		}
		x := d.list[0]
		pid, _ := strconv.Atoi(strings.TrimSpace(out))
		if x.GetField() != "filesystem.write" || x.GetTarget() != "/etc/blocked" || x.GetErrno() != refusedErrno(set) ||
			(x.GetOperation() != "open" && x.GetOperation() != "openat") || x.GetCommand() != "sh" || int(x.GetPid()) != pid || x.GetHostPid() <= 0 || x.GetTime() == nil {
			t.Errorf("recorded %v, want filesystem.write open(at) /etc/blocked %s by sh, pid %d", x, refusedErrno(set), pid)
		}
		if set == SetLandlock && x.GetHostPid() != x.GetPid() {
			t.Errorf("without a pid namespace the sandbox's pid %d is the host's, recorded %d", x.GetPid(), x.GetHostPid())
		}
		wantObserved(t, p, map[string]bool{"filesystem.write": true, "filesystem.read": false, "network.mode": true, "process": true})
	})
}

func TestNoDenialOfWritesTheSandboxMayMake(t *testing.T) {
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		w := hostDir(t, 0o777)
		script := `cd ` + w + ` && echo x > f && mkdir d && mv f d/g && ln -s g d/l && ln d/g h && rm -r d h && echo y > /dev/null && : > ./t && truncate -s 0 t`
		if set == SetNamespaces {
			// The private /tmp and /dev/shm.
			script += ` && echo t > /tmp/t && mkdir /tmp/d && echo s > /dev/shm/s`
		}
		// One refused write last, to show the calls before it were seen.
		script += ` && ! echo x > /etc/blocked`
		_, _, _, st, d := runRecorded(t, b, testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/sh", "-c", script))
		if st.ExitCode != 0 {
			t.Fatalf("status %+v", st)
		}
		wantDenials(t, d, []string{"filesystem.write open* /etc/blocked " + refusedErrno(set)})
	})
}

func TestDenialsOfCarveOutAndDenyPath(t *testing.T) {
	t.Run("namespaces", func(t *testing.T) {
		w := hostDir(t, 0o777)
		os.MkdirAll(w+"/.git", 0o777)
		os.MkdirAll(w+"/secret", 0o777)
		outside := hostDir(t, 0o755)
		key := outside + "/key"
		os.WriteFile(key, []byte("k"), 0o666)
		os.Chmod(key, 0o666)
		pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, ReadOnly: []string{w + "/.git"}, Deny: []string{w + "/secret", key}}}
		script := `echo b > ` + w + `/.git/x; echo c > ` + w + `/secret/x; mv ` + w + `/.git ` + w + `/g2; echo d >> ` + key + `; echo e > ` + key + `; true`
		_, _, _, _, d := runRecorded(t, newBackend(t), testSpec(t, pol, "/bin/sh", "-c", script))
		wantDenials(t, d, []string{
			"filesystem.read_only open* " + w + "/.git/x EROFS",
			"filesystem.deny open* " + w + "/secret/x EACCES",
			"filesystem.read_only rename* " + w + "/.git EBUSY",
			"filesystem.deny open* " + key + " EACCES",
			"filesystem.deny open* " + key + " EROFS",
		})
	})
	// The landlock set takes neither carve-outs nor deny paths inside
	// write roots.
	t.Run("landlock", func(t *testing.T) {
		b := landlockBackend(t)
		w := hostDir(t, 0o777)
		secret := hostDir(t, 0o777)
		pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, Deny: []string{secret}}}
		script := `echo c > ` + secret + `/x; mkdir ` + secret + `/d; true`
		_, _, _, _, d := runRecorded(t, b, testSpec(t, pol, "/bin/sh", "-c", script))
		wantDenials(t, d, []string{
			"filesystem.deny open* " + secret + "/x EACCES",
			"filesystem.deny mkdir* " + secret + "/d EACCES",
		})
	})
}

// wantDenials fails unless d holds exactly the records want describes,
// "FIELD OPERATION TARGET ERRNO" (the target may hold spaces), in any
// order; an operation ending in *
// matches any with that prefix (open and openat, rename and renameat2).
func wantDenials(t *testing.T, d *denials, want []string) {
	t.Helper()
	left := slices.Clone(d.list)
	for _, w := range want {
		f := strings.Fields(w)
		field, op, target, errno := f[0], f[1], strings.Join(f[2:len(f)-1], " "), f[len(f)-1]
		i := slices.IndexFunc(left, func(x *sandboxdv1.Denial) bool {
			opOK := x.GetOperation() == op || strings.HasSuffix(op, "*") && strings.HasPrefix(x.GetOperation(), strings.TrimSuffix(op, "*"))
			return x.GetField() == field && opOK && x.GetTarget() == target && x.GetErrno() == errno
		})
		if i < 0 {
			t.Errorf("not recorded: %s", w)
			continue
		}
		left = slices.Delete(left, i, i+1)
	}
	for _, x := range left {
		t.Errorf("recorded, not expected: %s %s %s %s", x.GetField(), x.GetOperation(), x.GetTarget(), x.GetErrno())
	}
}

// TestDenialsOfWriteCalls makes every kind of write-intent call, naming
// its path every way the sandbox can, and wants each refusal recorded with
// the errno the call got.
func TestDenialsOfWriteCalls(t *testing.T) {
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		w := hostDir(t, 0o777)
		ro := hostDir(t, 0o777)
		// Writable to the sandbox's uid but for the policy: only the
		// policy can be what refuses.
		os.WriteFile(ro+"/file", []byte("f"), 0o666)
		os.Chmod(ro+"/file", 0o666)
		spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, probeBinary(t), "-test.run=^$")
		spec.Env = append(spec.Env, envDenialProbe+"=fs", envWriteRoot+"="+w, envReadOnlyDir+"="+ro)
		out, _, _, _, d := runRecorded(t, b, spec)
		got := probeLines(out)
		pid, _ := strconv.Atoi(got["pid"])
		var want []string
		for _, c := range []struct{ probe, op, target string }{
			{"openat2", "openat2", ro + "/o2"},
			{"open", "open", ro + "/legacy"},
			{"creat", "creat", ro + "/creat"},
			{"mkdir", "mkdir", ro + "/legacydir"},
			{"mkdirat", "mkdirat", ro + "/newdir"},
			{"symlinkat", "symlinkat", ro + "/sl"},
			{"mknodat", "mknodat", ro + "/fifo"},
			{"truncate", "truncate", ro + "/file"},
			{"open-existing", "openat", ro + "/file"},
			{"renameat", "renameat*", ro + "/file"},
			{"unlinkat", "unlinkat", ro + "/file"},
			{"relative", "openat", ro + "/rel"},
			{"proc-self", "openat", ro + "/viaproc"},
			{"thread-self", "openat", ro + "/viathread"},
			{"through-symlink", "openat", ro + "/vialink"},
			{"dotdot", "openat", ro + "/dotdot"},
		} {
			if !present(nrOpen) && (c.op == "open" || c.op == "creat" || c.op == "mkdir") {
				continue
			}
			errno := got[c.probe]
			if errno != refusedErrno(set) {
				t.Errorf("%s: the call got %q, want %s", c.probe, errno, refusedErrno(set))
			}
			want = append(want, fmt.Sprintf("filesystem.write %s %s %s", c.op, c.target, errno))
		}
		for _, ok := range []string{"read-only-open", "symlink-in-write-root", "write-root", "dev-fd", "proc-fd"} {
			if got[ok] != "ok" {
				t.Errorf("%s: %q, want ok", ok, got[ok])
			}
		}
		wantDenials(t, d, want)
		for _, x := range d.list {
			if int(x.GetPid()) != pid || x.GetCommand() != "probe" {
				t.Errorf("recorded for pid %d %q, want the probe, pid %d", x.GetPid(), x.GetCommand(), pid)
			}
		}
	})
}

func TestDenialsOfConnectUnderNetworkNone(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
	sockDir := hostDir(t, 0o755)
	hostSock := sockDir + "/host.sock"
	ul, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	os.Chmod(hostSock, 0o777)
	probe := probeBinary(t)
	spec := func(mode sandboxdv1.Network_Mode) launcher.Spec {
		s := testSpec(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: mode}}, probe, "-test.run=^$")
		s.Env = append(s.Env, envDenialProbe+"=connect", envPort+"="+port, envUnixSocket+"="+hostSock)
		return s
	}
	out, _, p, _, d := runRecorded(t, newBackend(t), spec(sandboxdv1.Network_NONE))
	got := probeLines(out)
	// A unix stream socket may be made; its connect reaches no host
	// socket, and one to a path where nothing is fails as on a host
	// without it (glibc tries nscd's socket on every user lookup).
	wantProbe(t, got, map[string]string{"tcp-blocking": "ECONNREFUSED", "tcp-dial": "ECONNREFUSED", "tcp-unreachable": "ENETUNREACH",
		"unix-socket": "ok", "unix-host": "ECONNREFUSED", "unix-missing": "ENOENT"})
	wantDenials(t, d, []string{
		"network.mode connect 127.0.0.1:" + port + " ECONNREFUSED",
		"network.mode connect 127.0.0.1:" + port + " ECONNREFUSED",
		"network.mode connect 10.1.2.3:80 ENETUNREACH",
		"network.mode connect unix:" + hostSock + " ECONNREFUSED",
	})
	wantObserved(t, p, map[string]bool{"network.mode": true})

	// The host's network: the same connects reach the host's listeners,
	// and nothing is refused.
	out, _, p, _, d = runRecorded(t, newBackend(t), spec(sandboxdv1.Network_HOST))
	wantProbe(t, probeLines(out), map[string]string{"tcp-blocking": "ok", "tcp-dial": "ok", "unix-socket": "ok", "unix-host": "ok", "unix-missing": "ENOENT"})
	for _, x := range d.list {
		if x.GetField() == "network.mode" {
			t.Errorf("network HOST: recorded %v", x)
		}
	}
	wantObserved(t, p, map[string]bool{"network.mode": true})
}

func TestDenialOfSocketInLandlockSet(t *testing.T) {
	b := landlockBackend(t)
	spec := testSpec(t, nil, probeBinary(t), "-test.run=^$")
	spec.Env = append(spec.Env, envDenialProbe+"=socket")
	out, _, _, _, d := runRecorded(t, b, spec)
	wantProbe(t, probeLines(out), map[string]string{"inet-socket": "EPERM"})
	wantDenials(t, d, []string{"network.mode socket AF_INET EPERM"})
}

func TestDenialsOfProcessSyscalls(t *testing.T) {
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		spec := testSpec(t, nil, probeBinary(t), "-test.run=^$")
		spec.Env = append(spec.Env, envDenialProbe+"=process")
		out, _, _, _, d := runRecorded(t, b, spec)
		wantProbe(t, probeLines(out), map[string]string{"unshare": "EPERM", "ptrace": "EPERM", "tiocsti": "EPERM", "clone3": "ENOSYS"})
		wantDenials(t, d, []string{
			"process unshare CLONE_NEWUSER EPERM",
			"process ptrace PTRACE_ATTACH EPERM",
			"process ioctl TIOCSTI EPERM",
		})
	})
}

// backendWithout is b's host with user notification failing, as a
// container's seccomp profile may make it.
func backendWithout(t testing.TB, b launcher.Backend) launcher.Backend {
	t.Helper()
	orig := b.(*backend)
	h := *orig.host
	h.Results = slices.Clone(h.Results)
	for i, r := range h.Results {
		if r.Name == PrimSeccompNotify {
			h.Results[i] = ProbeResult{Name: r.Name, Op: r.Op, Errno: unix.EBUSY, Detail: "simulated"}
		}
	}
	return &backend{host: &h, forced: orig.forced, placeholders: map[string]*placeholder{}, inits: orig.inits}
}

func TestNoUserNotificationRefusesAllTheSame(t *testing.T) {
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		b = backendWithout(t, b)
		if set == SetLandlock {
			// Without it nothing would keep metadata calls inside the
			// write roots: the landlock set refuses.
			_, err := b.Start(context.Background(), testSpec(t, nil, "/bin/true"))
			var u *launcher.Unenforceable
			if !errors.As(err, &u) || u.Field != "filesystem.write" || u.Remedy == "" || !strings.Contains(u.Mechanism, "seccomp user notification") {
				t.Fatalf("want a filesystem.write refusal naming seccomp user notification, got %v", err)
			}
			return
		}
		spec := testSpec(t, nil, probeBinary(t), "-test.run=^$")
		spec.Env = append(spec.Env, envDenialProbe+"=process")
		out, _, p, _, d := runRecorded(t, b, spec)
		wantProbe(t, probeLines(out), map[string]string{"unshare": "EPERM", "ptrace": "EPERM", "tiocsti": "EPERM", "clone3": "ENOSYS"})
		_, _, _, st, d2 := runRecorded(t, b, testSpec(t, nil, "/bin/sh", "-c", "echo x > /etc/blocked"))
		if st.ExitCode == 0 {
			t.Errorf("the write succeeded: %+v", st)
		}
		if len(d.list)+len(d2.list) != 0 {
			t.Error("refusals recorded without a listener")
		}
		wantObserved(t, p, map[string]bool{"filesystem.write": false, "filesystem.read": false, "network.mode": false, "process": false})
		for _, s := range p.Enforcement().GetDenialSources() {
			if s.GetKind() != "filesystem.read" && !strings.Contains(s.GetHow(), "seccomp user notification unavailable") {
				t.Errorf("%s: %q does not say why", s.GetKind(), s.GetHow())
			}
		}
	})
}

// BenchmarkWriteOpen measures one open of a file in a write root for
// writing, and its close, inside a sandbox: with the round trip to the
// daemon that records refusals, and without a listener.
func BenchmarkWriteOpen(b *testing.B) {
	probe := probeBinary(b)
	for _, set := range MechanismSets {
		for _, notify := range []bool{true, false} {
			name := string(set) + "/notified"
			if !notify {
				name = string(set) + "/unnotified"
			}
			b.Run(name, func(b *testing.B) {
				be := backendFor(b, set)
				if !notify {
					if set == SetLandlock {
						b.Skip("the landlock set refuses to run without seccomp user notification")
					}
					be = backendWithout(b, be)
				}
				w := benchDir(b)
				ns := benchLoop(b, be, probe, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "opens", w, "ns-per-open")
				b.ReportMetric(float64(ns), "ns/open")
			})
		}
	}
}

// BenchmarkMetadataCall measures one stat and one chmod of a file in a
// write root inside a sandbox whose policy has a deny path: on the
// namespaces set chmod is notified to be recorded and stat is the
// kernel's alone; on the landlock set the daemon performs both.
func BenchmarkMetadataCall(b *testing.B) {
	probe := probeBinary(b)
	for _, set := range MechanismSets {
		for _, what := range []string{"stats", "chmods"} {
			b.Run(string(set)+"/"+what, func(b *testing.B) {
				be := backendFor(b, set)
				w, deny := benchDir(b), benchDir(b)
				ns := benchLoop(b, be, probe, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, Deny: []string{deny}}}, what, w, "ns-per-call")
				b.ReportMetric(float64(ns), "ns/call")
			})
		}
	}
}

// benchDir is a directory on the host anyone may write, removed after b.
func benchDir(b *testing.B) string {
	w, err := os.MkdirTemp("/var/tmp", "sandboxd-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(w) })
	os.Chmod(w, 0o777)
	return w
}

// benchLoop runs the denial probe in mode b.N times over write root w
// under pol and returns the nanoseconds per call it reports as key.
func benchLoop(b *testing.B, be launcher.Backend, probe string, pol *sandboxdv1.Policy, mode, w, key string) int {
	spec := testSpec(b, pol, probe, "-test.run=^$")
	spec.Env = append(spec.Env, envDenialProbe+"="+mode, envWriteRoot+"="+w, envOpens+"="+strconv.Itoa(b.N))
	spec.OnDenial = func(*sandboxdv1.Denial) {}
	outR, outW, _ := os.Pipe()
	spec.Stdio.Stdout = outW
	p, err := be.Start(context.Background(), spec)
	outW.Close()
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(outR)
	outR.Close()
	p.Wait()
	ns, err := strconv.Atoi(probeLines(string(out))[key])
	if err != nil {
		b.Fatalf("probe: %q", out)
	}
	return ns
}
