package launcherlinux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const probeArg0 = "sandboxd-probe"

// probeTimeout bounds each probe child: a host that hangs a clone or a
// mount must not hang the daemon's start.
const probeTimeout = 5 * time.Second

// ProbeHost tries, each in a short-lived child of initPath (a binary that
// calls RunProbeIfRequested), the primitives the mechanism sets need, as
// the identity uid:gid that sandboxes run as.
func ProbeHost(ctx context.Context, initPath string, uid, gid uint32) *HostProbe {
	h := &HostProbe{EUID: os.Geteuid(), Container: detectContainer(), Kernel: kernelRelease()}
	h.Root = h.EUID == 0 && h.Container == ""
	root := h.EUID == 0
	if uid == 0 || !root {
		uid, gid = uint32(os.Getuid()), uint32(os.Getgid())
	}
	userns := func(extra uintptr, caps ...uintptr) *syscall.SysProcAttr {
		sys := &syscall.SysProcAttr{
			Cloneflags:                 unix.CLONE_NEWUSER | extra,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: int(uid), Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: int(gid), Size: 1}},
			GidMappingsEnableSetgroups: root,
			AmbientCaps:                caps,
		}
		if root {
			sys.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
		}
		return sys
	}
	run := func(name, op, mode string, sys *syscall.SysProcAttr) ProbeResult {
		r, started := runProbeChild(ctx, initPath, mode, sys)
		r.Name = name
		// Only the clone's ENOSPC is about namespaces: the child's own
		// steps have theirs (open_tree past fs.mount-max).
		if !started && r.Errno == unix.ENOSPC && sys != nil && sys.Cloneflags != 0 {
			r.Detail = namespacesExhausted(uint64(sys.Cloneflags), "/proc/sys/user")
		}
		if r.Op == "" {
			r.Op = op
		}
		h.Results = append(h.Results, r)
		return r
	}
	ns := run(PrimUserNS, "clone(CLONE_NEWUSER)", "exit", &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER})
	if ns.OK {
		run(PrimIDMap, fmt.Sprintf("clone(CLONE_NEWUSER) + write uid_map %d and gid_map %d", uid, gid), "exit", userns(0))
	} else {
		h.Results = append(h.Results, ProbeResult{Name: PrimIDMap, Op: "uid_map", Detail: "needs a user namespace"})
	}
	for _, k := range []struct {
		name string
		flag uintptr
		op   string
	}{
		{PrimMountNS, unix.CLONE_NEWNS, "CLONE_NEWNS"},
		{PrimPIDNS, unix.CLONE_NEWPID, "CLONE_NEWPID"},
		{PrimIPCNS, unix.CLONE_NEWIPC, "CLONE_NEWIPC"},
		{PrimUTSNS, unix.CLONE_NEWUTS, "CLONE_NEWUTS"},
		{PrimCgroupNS, unix.CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
		{PrimNetNS, unix.CLONE_NEWNET, "CLONE_NEWNET"},
	} {
		run(k.name, "clone(CLONE_NEWUSER|"+k.op+")", "exit", userns(k.flag))
	}
	run(PrimLoopback, "SIOCSIFFLAGS lo up in clone(CLONE_NEWUSER|CLONE_NEWNET)", "loopback", userns(unix.CLONE_NEWNET, unix.CAP_NET_ADMIN))
	run(PrimMounts, "open_tree(/, OPEN_TREE_CLONE|AT_RECURSIVE) + fsopen(tmpfs) in clone(CLONE_NEWUSER|CLONE_NEWNS)", "mount", userns(unix.CLONE_NEWNS, unix.CAP_SYS_ADMIN))
	// The landlock set runs the command as the sandbox identity with no
	// namespace: a root daemon must be able to switch to it directly.
	var plain *syscall.SysProcAttr
	if root {
		plain = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
		if !run(PrimSwitchID, fmt.Sprintf("setgroups([]) + setgid(%d) + setuid(%d)", gid, uid), "exit", plain).OK {
			// What follows is about the kernel, not the identity: ask
			// as the daemon rather than report a failed switch again.
			plain = nil
		}
	}
	ll := run(PrimLandlock, "landlock_create_ruleset + landlock_restrict_self", "landlock", plain)
	if ll.OK {
		fmt.Sscanf(ll.Detail, "abi %d", &h.LandlockABI)
	}
	run(PrimSeccomp, "seccomp(SECCOMP_SET_MODE_FILTER)", "seccomp", plain)
	run(PrimSeccompNotify, "seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER) + pidfd_open + pidfd_getfd + process_vm_readv", "seccomp-notify", plain)
	// The daemon itself makes the sessions' cgroups, so its own view is
	// the probe.
	h.cgroups = detectCgroups()
	h.Results = append(h.Results, h.cgroups.probes()...)
	return h
}

// nsLimits are the sysctls under /proc/sys/user that cap, each for its own
// kind, the namespaces a clone flag makes; any of them reached or 0 fails
// the clone with ENOSPC.
var nsLimits = []struct {
	flag uint64
	kind string
	name string
}{
	{unix.CLONE_NEWUSER, "user", "max_user_namespaces"}, {unix.CLONE_NEWNS, "mount", "max_mnt_namespaces"},
	{unix.CLONE_NEWPID, "pid", "max_pid_namespaces"}, {unix.CLONE_NEWIPC, "ipc", "max_ipc_namespaces"},
	{unix.CLONE_NEWUTS, "uts", "max_uts_namespaces"}, {unix.CLONE_NEWCGROUP, "cgroup", "max_cgroup_namespaces"},
	{unix.CLONE_NEWNET, "net", "max_net_namespaces"}, {unix.CLONE_NEWTIME, "time", "max_time_namespaces"},
}

// namespacesExhausted says what ENOSPC from a clone with the namespace flags
// flags means, which its text, "no space left on device", sent operators to
// their disks: no more namespaces of one of those kinds may be made for the
// daemon. It names the limits, read from dir (/proc/sys/user), that are 0,
// which is the likely cause, or else every limit of those kinds.
func namespacesExhausted(flags uint64, dir string) string {
	var kinds, off, all []string
	for _, l := range nsLimits {
		if flags&l.flag == 0 {
			continue
		}
		kinds = append(kinds, l.kind)
		limit := "user." + l.name
		if b, err := os.ReadFile(filepath.Join(dir, l.name)); err == nil {
			v := strings.TrimSpace(string(b))
			limit += " is " + v
			if v == "0" {
				off = append(off, limit)
			}
		}
		all = append(all, limit)
	}
	what := "no more " + strings.Join(kinds, ", ") + " namespaces"
	if len(kinds) > 1 {
		what = "no more namespaces of one of the kinds " + strings.Join(kinds, ", ")
	}
	head := "ENOSPC from clone(" + cloneFlagNames(flags) + "): " + what + " for this daemon, not a full filesystem ("
	if len(off) > 0 {
		return head + strings.Join(off, ", ") + ", 0 turning that kind off)"
	}
	nested := ""
	if flags&unix.CLONE_NEWUSER != 0 {
		nested += "; or the daemon is 32 user namespaces deep"
	}
	if flags&unix.CLONE_NEWPID != 0 {
		nested += "; or it is 32 pid namespaces deep"
	}
	return head + strings.Join(all, ", ") + ": each a limit per user and per enclosing user namespace as well as the host's" + nested + ")"
}

// probeOutcome is what a probe child prints.
type probeOutcome struct {
	OK     bool   `json:"ok"`
	Op     string `json:"op,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// runProbeChild runs one probe child; started is false when it could not be
// started, the clone (or the id maps' writes) failing.
func runProbeChild(ctx context.Context, initPath, mode string, sys *syscall.SysProcAttr) (r ProbeResult, started bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, initPath, mode)
	cmd.Args[0] = probeArg0
	cmd.Env = []string{}
	cmd.Stdout = &out
	if sys == nil {
		sys = &syscall.SysProcAttr{}
	}
	sys.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr = sys
	if err := cmd.Start(); err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		return ProbeResult{Errno: errno, Detail: err.Error()}, false
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		return ProbeResult{Errno: syscall.ETIMEDOUT, Detail: fmt.Sprintf("no answer within %v", probeTimeout)}, true
	}
	var o probeOutcome
	if jerr := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &o); jerr != nil {
		return ProbeResult{Detail: fmt.Sprintf("probe child: %v (%v)", err, jerr)}, true
	}
	return ProbeResult{OK: o.OK, Op: o.Op, Errno: syscall.Errno(o.Errno), Detail: o.Detail}, true
}

// RunProbeIfRequested turns this process into a host probe child when it
// was started as one, and never returns in that case. Every binary that
// embeds the backend (sandboxd, and test binaries that start sandboxes)
// calls it first thing in main or TestMain. (A sandbox init never gets
// that far: package sandboxinit takes it over before main.)
func RunProbeIfRequested() {
	if os.Args[0] != probeArg0 {
		return
	}
	if len(os.Args) == 2 {
		runProbe(os.Args[1])
	}
	os.Exit(2)
}

// runProbe is the child side: it tries one primitive and prints the
// outcome.
func runProbe(mode string) {
	o := probeOutcome{OK: true}
	fail := func(op string, err error) {
		o = probeOutcome{Op: op, Errno: errnoOf(err), Detail: err.Error()}
	}
	switch mode {
	case "exit":
	case "loopback":
		if err := loopbackUp(); err != nil {
			fail("SIOCSIFFLAGS lo up", err)
		}
	case "mount":
		if err := probeMounts(); err != nil {
			fail("", err)
		}
	case "landlock":
		abi, err := probeLandlock()
		if err != nil {
			fail("", err)
		} else {
			o.Detail = fmt.Sprintf("abi %d", abi)
		}
	case "seccomp", "seccomp-notify":
		if err := probeSeccomp(mode == "seccomp-notify"); err != nil {
			fail("", err)
		}
	default:
		fail("probe", fmt.Errorf("unknown probe %q", mode))
	}
	b, _ := json.Marshal(o)
	os.Stdout.Write(append(b, '\n'))
	os.Exit(0)
}

func probeMounts() error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree /: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("mount_setattr RDONLY: %w", err)
	}
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("fsconfig create tmpfs: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fsmount tmpfs: %w", err)
	}
	unix.Close(mfd)
	return nil
}

// probeLandlock restricts this child for real: a kernel can report an ABI
// and still refuse a ruleset (an LSM stack without landlock enabled).
func probeLandlock() (int, error) {
	abi, err := landlockABI()
	if err != nil {
		return 0, fmt.Errorf("landlock_create_ruleset(VERSION): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	attr := [2]uint64{llWriteFile} // struct landlock_ruleset_attr of ABI 1
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 16, 0)
	if errno != 0 {
		return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return 0, fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return abi, nil
}

// landlockABI asks the kernel which Landlock ABI it offers; 0 when none.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// loopbackUp brings lo up in this process's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}

func probeSeccomp(notify bool) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	filters := []unix.SockFilter{{Code: bpfRetK, K: retAllow}}
	prog := unix.SockFprog{Len: 1, Filter: &filters[0]}
	flags := uintptr(0)
	if notify {
		// A listener needs a filter that can return USER_NOTIF; the
		// kernel checks the flag, not the program.
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	if notify {
		defer unix.Close(int(r))
		return probeConnectEmulation(int(r))
	}
	return nil
}

// probeConnectEmulation tries on this process the calls the daemon makes to
// perform a sandbox's connect(): an outer seccomp profile may forbid them
// even where user notification itself works.
func probeConnectEmulation(listener int) error {
	pidfd, err := targetPidfd(unix.Gettid())
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, listener, 0)
	if err != nil {
		return fmt.Errorf("pidfd_getfd: %w", err)
	}
	unix.Close(fd)
	src, dst := []byte{1}, []byte{0}
	if _, err := unix.ProcessVMReadv(os.Getpid(), []unix.Iovec{{Base: &dst[0], Len: 1}}, []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: 1}}, 0); err != nil {
		return fmt.Errorf("process_vm_readv: %w", err)
	}
	runtime.KeepAlive(src)
	return nil
}

// detectContainer names the container the daemon runs in: its runtime's
// marker file, or a user namespace that is not the initial one.
func detectContainer() string {
	if _, err := os.Stat("/.dockerenv"); err == nil {
		return "docker"
	}
	if _, err := os.Stat("/run/.containerenv"); err == nil {
		return "podman"
	}
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		f := strings.Fields(string(b))
		if len(f) != 3 || f[0] != "0" || f[1] != "0" || f[2] != "4294967295" {
			return "user namespace"
		}
	}
	return ""
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
}
