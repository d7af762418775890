//go:build linux

package hostsim

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// helperEnv switches the test binary into a probe that tries one kernel
// operation and prints what came of it, so each test can run the same probe
// with and without hostsim around it.
const helperEnv = "HOSTSIM_TEST_HELPER"

func TestMain(m *testing.M) {
	if op := os.Getenv(helperEnv); op != "" {
		os.Exit(helper(op))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// helper prints "name=errno" pairs, errno 0 meaning success.
func helper(op string) int {
	results, err := probe(op)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", op, err)
		return 1
	}
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%s=%d\n", r.name, int(r.errno))
	}
	os.Stdout.WriteString(b.String())
	return 0
}

type result struct {
	name  string
	errno syscall.Errno
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return unix.EIO
}

// allowAll is a filter that changes nothing, for probing whether a filter
// can be installed at all.
var allowAll = []unix.SockFilter{{Code: bpfRetK, K: unix.SECCOMP_RET_ALLOW}}

func probe(op string) ([]result, error) {
	switch op {
	case "landlock":
		_, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		return []result{{"landlock_create_ruleset", e}}, nil

	case "seccomp":
		// Filters apply per thread; keep both attempts on this one.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
		}
		fprog := unix.SockFprog{Len: uint16(len(allowAll)), Filter: &allowAll[0]}
		_, _, e1 := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
		e2 := errnoOf(unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0))
		return []result{{"seccomp", e1}, {"prctl", e2}}, nil

	case "loopback":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return nil, err
		}
		get := errnoOf(unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr))
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		set := errnoOf(unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr))
		return []result{{"get", get}, {"set", set}}, nil

	case "mount":
		dir, err := os.MkdirTemp("", "hostsim-mnt-")
		if err != nil {
			return nil, err
		}
		defer os.Remove(dir)
		m := errnoOf(unix.Mount("none", dir, "tmpfs", 0, ""))
		if m == 0 {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err == nil {
			unix.Close(fs)
		}
		// Mounts inherited into a namespace of a new user namespace are
		// locked to their parents, so cloning one takes its whole subtree.
		tree, err2 := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err2 == nil {
			unix.Close(tree)
		}
		return []result{{"mount", m}, {"fsopen", errnoOf(err)}, {"open_tree", errnoOf(err2)}}, nil

	case "setns":
		runtime.LockOSThread()
		fd, err := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		return []result{{"setns", errnoOf(unix.Setns(fd, unix.CLONE_NEWUTS))}}, nil

	case "clone3":
		// A NULL, zero-sized argument is refused before anything is
		// created, which tells the filter's ENOSYS apart from the kernel.
		_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
		return []result{{"clone3", e}}, nil

	case "x32":
		_, _, e := unix.Syscall(x32Bit|unix.SYS_GETPID, 0, 0, 0)
		return []result{{"x32_getpid", e}}, nil
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

var built struct {
	once sync.Once
	dir  string
	err  error
}

// hostsimBin builds cmd/hostsim once per test binary, so the tests exercise
// the real command and its exec, not just the library.
func hostsimBin(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.err = os.MkdirTemp("", "hostsim-bin-")
		if built.err != nil {
			return
		}
		// Without VCS stamping the build works in a checkout owned by
		// another user, as in rootless runs; like the conformance suite's.
		cmd := exec.Command(gobin, "build", "-buildvcs=false", "-o", filepath.Join(built.dir, "hostsim"),
			"github.com/sandboxd/sandboxd/internal/hostsim/cmd/hostsim")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatalf("building hostsim: %v", built.err)
	}
	return filepath.Join(built.dir, "hostsim")
}

func needFilterArch(t *testing.T) {
	t.Helper()
	if _, ok := auditArches[runtime.GOARCH]; !ok {
		t.Skipf("hostsim builds filters for amd64 and arm64 only; this is %s", runtime.GOARCH)
	}
}

func needCommand(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
}

type outcome struct {
	code           int
	stdout, stderr string
}

// run runs argv, under hostsim with the given flags unless hs is nil.
func run(t *testing.T, hs []string, env []string, argv ...string) outcome {
	t.Helper()
	if hs != nil {
		argv = append(append(append([]string{hostsimBin(t)}, hs...), "--"), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%q: %v", argv, err)
		}
		o.code = ee.ExitCode()
	}
	return o
}

// runProbe runs this test binary as the probe for op, behind the wrapper
// command (such as unshare) if any, and under hostsim unless hs is nil.
func runProbe(t *testing.T, hs []string, op string, wrapper ...string) map[string]syscall.Errno {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string{}, wrapper...), self)
	o := run(t, hs, []string{helperEnv + "=" + op}, argv...)
	if o.code != 0 {
		t.Fatalf("probe %s under hostsim %q behind %q: exit %d\nstdout: %s\nstderr: %s",
			op, hs, wrapper, o.code, o.stdout, o.stderr)
	}
	got := map[string]syscall.Errno{}
	for line := range strings.Lines(o.stdout) {
		name, num, ok := strings.Cut(strings.TrimSpace(line), "=")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("probe %s printed %q", op, o.stdout)
		}
		got[name] = syscall.Errno(n)
	}
	return got
}

func expectProbe(t *testing.T, hs []string, op string, wrapper []string, want map[string]syscall.Errno) {
	t.Helper()
	got := runProbe(t, hs, op, wrapper...)
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("probe %s under hostsim %q: no result for %s", op, hs, name)
			continue
		}
		if g != w {
			t.Errorf("probe %s under hostsim %q: %s got %s, want %s", op, hs, name, errnoString(g), errnoString(w))
		}
	}
}

func errnoString(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return fmt.Sprintf("%s (%d)", unix.ErrnoName(e), int(e))
}

// expectCommand runs argv and checks whether it succeeds.
func expectCommand(t *testing.T, hs []string, succeed bool, argv ...string) {
	t.Helper()
	o := run(t, hs, nil, argv...)
	if (o.code == 0) != succeed {
		t.Errorf("%q under hostsim %q: exit %d, want success=%v\nstderr: %s", argv, hs, o.code, succeed, o.stderr)
	}
}

func deny(names string, more ...string) []string {
	return append([]string{"--deny", names}, more...)
}

func TestDenyUserns(t *testing.T) {
	needFilterArch(t)
	needCommand(t, "unshare")
	expectCommand(t, nil, true, "unshare", "--user", "true")
	expectCommand(t, deny("userns"), false, "unshare", "--user", "true")
	expectCommand(t, deny("namespaces"), false, "unshare", "--user", "true")
	expectCommand(t, deny("netns"), true, "unshare", "--user", "true")
	expectCommand(t, deny("landlock"), true, "unshare", "--user", "true")
	// A forked grandchild, like a sandbox the daemon starts, inherits it.
	o := run(t, deny("userns"), nil, "sh", "-c", "unshare --user true || exit 3")
	if o.code != 3 {
		t.Errorf("unshare --user from a forked shell under --deny userns: exit %d, want 3\nstderr: %s", o.code, o.stderr)
	}

	expectProbe(t, nil, "clone3", nil, map[string]syscall.Errno{"clone3": unix.EINVAL})
	expectProbe(t, deny("userns"), "clone3", nil, map[string]syscall.Errno{"clone3": unix.ENOSYS})
	expectProbe(t, deny("landlock"), "clone3", nil, map[string]syscall.Errno{"clone3": unix.EINVAL})
}

func TestDenyNetns(t *testing.T) {
	needFilterArch(t)
	needCommand(t, "unshare")
	netns := []string{"unshare", "--user", "--map-root-user", "--net", "true"}
	expectCommand(t, nil, true, netns...)
	expectCommand(t, deny("netns"), false, netns...)
	expectCommand(t, deny("netns"), true, "unshare", "--user", "--map-root-user", "--mount", "true")
	expectCommand(t, deny("mount"), true, netns...)
}

func TestDenyNamespaces(t *testing.T) {
	needFilterArch(t)
	needCommand(t, "unshare")
	for _, flag := range []string{"--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--time"} {
		argv := []string{"unshare", "--user", "--map-root-user", flag, "true"}
		if o := run(t, nil, nil, argv...); o.code != 0 {
			t.Logf("%q fails without hostsim, skipping it: %s", argv, o.stderr)
			continue
		}
		expectCommand(t, deny("namespaces"), false, argv...)
		// Without the user namespace, for a non-root user the kernel
		// refuses it anyway; this must be the filter.
		if os.Geteuid() == 0 {
			expectCommand(t, deny("namespaces"), false, "unshare", flag, "true")
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: setns into this process's own namespace needs CAP_SYS_ADMIN, skipping it")
		return
	}
	expectProbe(t, nil, "setns", nil, map[string]syscall.Errno{"setns": 0})
	expectProbe(t, deny("namespaces"), "setns", nil, map[string]syscall.Errno{"setns": unix.EPERM})
	expectProbe(t, deny("userns"), "setns", nil, map[string]syscall.Errno{"setns": 0})
}

func TestDenyLandlock(t *testing.T) {
	needFilterArch(t)
	if e := runProbe(t, nil, "landlock")["landlock_create_ruleset"]; e != 0 {
		t.Skipf("this host has no Landlock itself: %s", errnoString(e))
	}
	expectProbe(t, deny("landlock"), "landlock", nil, map[string]syscall.Errno{"landlock_create_ruleset": unix.EPERM})
	// A kernel with Landlock built in but not enabled answers EOPNOTSUPP.
	expectProbe(t, deny("landlock", "--errno", "EOPNOTSUPP"), "landlock", nil,
		map[string]syscall.Errno{"landlock_create_ruleset": unix.EOPNOTSUPP})
	expectProbe(t, deny("seccomp"), "landlock", nil, map[string]syscall.Errno{"landlock_create_ruleset": 0})
}

func TestDenySeccomp(t *testing.T) {
	needFilterArch(t)
	ok := map[string]syscall.Errno{"seccomp": 0, "prctl": 0}
	expectProbe(t, nil, "seccomp", nil, ok)
	expectProbe(t, deny("seccomp"), "seccomp", nil, map[string]syscall.Errno{"seccomp": unix.EPERM, "prctl": unix.EPERM})
	// The daemon stacks its sandbox filters on top of hostsim's.
	expectProbe(t, deny("landlock"), "seccomp", nil, ok)
}

func TestDenyLoopback(t *testing.T) {
	needFilterArch(t)
	needCommand(t, "unshare")
	netns := []string{"unshare", "--user", "--map-root-user", "--net"}
	expectProbe(t, nil, "loopback", netns, map[string]syscall.Errno{"get": 0, "set": 0})
	expectProbe(t, deny("loopback"), "loopback", netns, map[string]syscall.Errno{"get": 0, "set": unix.EPERM})
	expectProbe(t, deny("mount"), "loopback", netns, map[string]syscall.Errno{"get": 0, "set": 0})
}

func TestDenyMount(t *testing.T) {
	needFilterArch(t)
	needCommand(t, "unshare")
	needCommand(t, "mount")
	// unshare would otherwise call mount itself to make propagation
	// private, and fail there instead of in the command under test. A mount
	// namespace made with a new user namespace receives no propagation
	// back to the host.
	mntns := []string{"unshare", "--user", "--map-root-user", "--mount", "--propagation", "unchanged"}
	tmpfs := append(append([]string{}, mntns...), "mount", "-t", "tmpfs", "none", "/mnt")
	expectCommand(t, nil, true, tmpfs...)
	expectCommand(t, deny("mount"), false, tmpfs...)
	expectCommand(t, deny("loopback"), true, tmpfs...)

	ok := map[string]syscall.Errno{"mount": 0, "fsopen": 0, "open_tree": 0}
	expectProbe(t, nil, "mount", mntns, ok)
	expectProbe(t, deny("mount"), "mount", mntns,
		map[string]syscall.Errno{"mount": unix.EPERM, "fsopen": unix.EPERM, "open_tree": unix.EPERM})
	expectProbe(t, deny("landlock"), "mount", mntns, ok)
}

func TestX32Blocked(t *testing.T) {
	needFilterArch(t)
	if e := runProbe(t, nil, "x32")["x32_getpid"]; e == unix.EPERM {
		t.Fatalf("x32 getpid fails with EPERM without hostsim; the test cannot tell the filter apart")
	}
	expectProbe(t, deny("landlock"), "x32", nil, map[string]syscall.Errno{"x32_getpid": unix.EPERM})
}

func TestUsage(t *testing.T) {
	needFilterArch(t)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--deny", "userns"}, 2, "no command"},
		{[]string{"--deny", "userns", "--"}, 2, "no command"},
		{[]string{"--deny", "bogus", "--", "true"}, 2, `unknown denial "bogus"`},
		{[]string{"--deny", "userns,,bogus", "--", "true"}, 2, `unknown denial "bogus"`},
		{[]string{"--deny", "", "--", "true"}, 2, "at least one"},
		{[]string{"--", "true"}, 2, "at least one"},
		{[]string{"--deny", "userns", "--errno", "EBOGUS", "--", "true"}, 2, "--errno"},
		{[]string{"--nonsense", "--", "true"}, 2, "not defined"},
		{[]string{"--deny", "userns", "--", "hostsim-no-such-command"}, 127, "not found"},
		{[]string{"--deny", "userns,landlock", "--", "true"}, 0, ""},
	} {
		o := run(t, nil, nil, append([]string{hostsimBin(t)}, tc.args...)...)
		if o.code != tc.code || !strings.Contains(o.stderr, tc.says) {
			t.Errorf("hostsim %q: exit %d, stderr %q; want exit %d and %q", tc.args, o.code, o.stderr, tc.code, tc.says)
		}
	}
}
