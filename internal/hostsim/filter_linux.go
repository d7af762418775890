//go:build linux

package hostsim

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Classic BPF opcodes, combined the way the kernel's seccomp checker expects.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K
)

// Offsets into struct seccomp_data. Arguments are 64-bit; the filter reads
// only their low word (little-endian: the first four bytes), which is all
// the kernel looks at for clone flags, prctl options and ioctl requests.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
)

// Syscall numbers of the architecture this is built for: the filter
// compares seccomp_data.arch with that architecture's AUDIT_ARCH_* first
// (auditArch), so the numbers and the ABI they belong to cannot disagree.
const (
	nrIoctl                 = unix.SYS_IOCTL
	nrClone                 = unix.SYS_CLONE
	nrPivotRoot             = unix.SYS_PIVOT_ROOT
	nrPrctl                 = unix.SYS_PRCTL
	nrPersonality           = unix.SYS_PERSONALITY
	nrMount                 = unix.SYS_MOUNT
	nrUnshare               = unix.SYS_UNSHARE
	nrSetns                 = unix.SYS_SETNS
	nrSeccomp               = unix.SYS_SECCOMP
	nrOpenTree              = unix.SYS_OPEN_TREE
	nrMoveMount             = unix.SYS_MOVE_MOUNT
	nrFsopen                = unix.SYS_FSOPEN
	nrFsconfig              = unix.SYS_FSCONFIG
	nrFsmount               = unix.SYS_FSMOUNT
	nrClone3                = unix.SYS_CLONE3
	nrMountSetattr          = unix.SYS_MOUNT_SETATTR
	nrLandlockCreateRuleset = unix.SYS_LANDLOCK_CREATE_RULESET
	nrLandlockAddRule       = unix.SYS_LANDLOCK_ADD_RULE
	nrLandlockRestrictSelf  = unix.SYS_LANDLOCK_RESTRICT_SELF
)

// auditArches are the architectures hostsim builds filters for.
var auditArches = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// x32Bit marks x32-ABI syscall numbers, which on amd64 reach the same
// kernel code as the amd64 ones under other numbers and would slip past
// every rule below.
const x32Bit = 0x40000000

// maxErrno is the kernel's MAX_ERRNO: SECCOMP_RET_ERRNO clamps larger values.
const maxErrno = 4095

// cloneNewAll is every CLONE_NEW* flag, each of which makes a namespace.
const cloneNewAll = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// A denial is what one --deny name takes away. Several may touch the same
// syscall (userns and netns both look at clone flags), so Program merges them
// before emitting code rather than emitting each on its own.
type denial struct {
	// syscalls fail outright.
	syscalls []uint32
	// cloneFlags make clone and unshare fail when any of them is set.
	cloneFlags uint32
	// prctlOptions make prctl fail for these options.
	prctlOptions []uint32
	// ioctlRequests make ioctl fail for these requests, on any fd.
	ioctlRequests []uint32
}

var denials = map[string]denial{
	"userns": {cloneFlags: unix.CLONE_NEWUSER},
	"netns":  {cloneFlags: unix.CLONE_NEWNET},
	// setns is denied whatever its nstype: with nstype 0 the kernel takes the
	// type from the fd, which the filter cannot see.
	"namespaces": {cloneFlags: cloneNewAll, syscalls: []uint32{nrSetns}},
	// personality(2), queries included, as a container runtime's default
	// seccomp profile denies all but a few personas.
	"personality": {syscalls: []uint32{nrPersonality}},
	"landlock": {syscalls: []uint32{
		nrLandlockCreateRuleset, nrLandlockAddRule, nrLandlockRestrictSelf,
	}},
	// prctl(PR_SET_SECCOMP) is the older way in to the same filters.
	"seccomp": {syscalls: []uint32{nrSeccomp}, prctlOptions: []uint32{unix.PR_SET_SECCOMP}},
	// sandboxd brings up a new network namespace's loopback with
	// SIOCSIFFLAGS; reading the flags stays allowed, so only the step that
	// changes the link fails, as on hosts whose policy forbids it.
	"loopback": {ioctlRequests: []uint32{unix.SIOCSIFFLAGS}},
	// Both the classic mount(2) and the new mount API, so a caller cannot
	// succeed by switching from one to the other.
	"mount": {syscalls: []uint32{
		nrMount, nrOpenTree, nrMoveMount, nrFsopen,
		nrFsconfig, nrFsmount, nrMountSetattr, nrPivotRoot,
	}},
}

// Names lists the names Program accepts, sorted.
func Names() []string {
	names := make([]string, 0, len(denials))
	for n := range denials {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseErrno reads an errno given by name ("EPERM") or number ("1").
func ParseErrno(s string) (syscall.Errno, error) {
	if s == "" {
		return 0, fmt.Errorf("empty errno")
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > maxErrno {
			return 0, fmt.Errorf("errno %d out of range 1..%d", n, maxErrno)
		}
		return syscall.Errno(n), nil
	}
	want := strings.ToUpper(s)
	// unix.ErrnoName knows one name per number; these are the other names
	// Linux gives the same numbers, the first being what Landlock returns
	// when it is built but disabled.
	if e, ok := map[string]syscall.Errno{
		"EOPNOTSUPP":  unix.EOPNOTSUPP,
		"EWOULDBLOCK": unix.EWOULDBLOCK,
		"EDEADLOCK":   unix.EDEADLOCK,
	}[want]; ok {
		return e, nil
	}
	for n := 1; n <= maxErrno; n++ {
		if unix.ErrnoName(syscall.Errno(n)) == want {
			return syscall.Errno(n), nil
		}
	}
	return 0, fmt.Errorf("unknown errno %q", s)
}

// Program builds a seccomp filter under which the operations named in deny
// fail with errno, and everything else is allowed. It is pure: nothing is
// installed.
//
// clone3 passes its flags in memory the filter cannot read, so whenever a
// denial looks at clone flags, clone3 fails with ENOSYS: glibc and Go then
// fall back to clone, whose flags the filter can check. Syscalls of another
// architecture kill the process, as they would under any filter written for
// one ABI; on amd64, x32 syscalls fail with EPERM.
func Program(deny []string, errno syscall.Errno) ([]unix.SockFilter, error) {
	auditArch, ok := auditArches[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("hostsim builds filters for amd64 and arm64 only, not %s", runtime.GOARCH)
	}
	if errno < 1 || errno > maxErrno {
		return nil, fmt.Errorf("errno %d out of range 1..%d", int(errno), maxErrno)
	}
	var merged denial
	for _, name := range deny {
		d, ok := denials[name]
		if !ok {
			return nil, fmt.Errorf("unknown denial %q (known: %s)", name, strings.Join(Names(), ", "))
		}
		merged.syscalls = append(merged.syscalls, d.syscalls...)
		merged.cloneFlags |= d.cloneFlags
		merged.prctlOptions = append(merged.prctlOptions, d.prctlOptions...)
		merged.ioctlRequests = append(merged.ioctlRequests, d.ioctlRequests...)
	}
	// Deterministic output makes programs comparable across runs and
	// duplicates (from repeated or overlapping names) harmless.
	for _, s := range []*[]uint32{&merged.syscalls, &merged.prctlOptions, &merged.ioctlRequests} {
		slices.Sort(*s)
		*s = slices.Compact(*s)
	}

	fail := unix.SECCOMP_RET_ERRNO | uint32(errno)
	var p []unix.SockFilter
	stmt := func(code uint16, k uint32) { p = append(p, unix.SockFilter{Code: code, K: k}) }
	jump := func(code uint16, k uint32, jt, jf uint8) {
		p = append(p, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
	}
	// argRule fails syscall nr when its argument at off matches k under the
	// jump op. It leaves the syscall number in the accumulator, so rules can
	// follow one another.
	argRule := func(nr uint32, off uint32, op uint16, k uint32) {
		jump(bpfJeqK, nr, 0, 3)
		stmt(bpfLdAbsW, off)
		jump(op, k, 0, 1)
		stmt(bpfRetK, fail)
		stmt(bpfLdAbsW, offNr)
	}

	stmt(bpfLdAbsW, offArch)
	jump(bpfJeqK, auditArch, 1, 0)
	stmt(bpfRetK, unix.SECCOMP_RET_KILL_PROCESS)
	stmt(bpfLdAbsW, offNr)
	if runtime.GOARCH == "amd64" {
		jump(bpfJgeK, x32Bit, 0, 1)
		stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	}

	for _, nr := range merged.syscalls {
		jump(bpfJeqK, nr, 0, 1)
		stmt(bpfRetK, fail)
	}
	if merged.cloneFlags != 0 {
		jump(bpfJeqK, nrClone3, 0, 1)
		stmt(bpfRetK, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
		argRule(nrClone, offArg0, bpfJsetK, merged.cloneFlags)
		argRule(nrUnshare, offArg0, bpfJsetK, merged.cloneFlags)
	}
	for _, opt := range merged.prctlOptions {
		argRule(nrPrctl, offArg0, bpfJeqK, opt)
	}
	for _, req := range merged.ioctlRequests {
		argRule(nrIoctl, offArg1, bpfJeqK, req)
	}
	stmt(bpfRetK, unix.SECCOMP_RET_ALLOW)

	if len(p) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp program has %d instructions, the kernel takes %d", len(p), unix.BPF_MAXINSNS)
	}
	return p, nil
}
