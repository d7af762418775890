//go:build linux

package hostsim

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data as the filter sees it.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (d seccompData) word(t *testing.T, off uint32) uint32 {
	t.Helper()
	switch {
	case off == offNr:
		return d.nr
	case off == offArch:
		return d.arch
	case off >= offArg0 && off < offArg0+6*8 && off%4 == 0:
		a := d.args[(off-offArg0)/8]
		if (off-offArg0)%8 == 0 {
			return uint32(a)
		}
		return uint32(a >> 32)
	}
	t.Fatalf("load from offset %d, which the filter has no business reading", off)
	return 0
}

// evaluate runs prog over d the way the kernel would, for the instructions
// Program emits; anything else fails the test, so a new kind of instruction
// cannot go untested here.
func evaluate(t *testing.T, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(prog); {
		in := prog[pc]
		next := func(cond bool) {
			if cond {
				pc += 1 + int(in.Jt)
			} else {
				pc += 1 + int(in.Jf)
			}
		}
		switch in.Code {
		case bpfLdAbsW:
			a = d.word(t, in.K)
			pc++
		case bpfJeqK:
			next(a == in.K)
		case bpfJgeK:
			next(a >= in.K)
		case bpfJsetK:
			next(a&in.K != 0)
		case bpfRetK:
			return in.K
		default:
			t.Fatalf("instruction %d has opcode %#x, which evaluate does not know", pc, in.Code)
		}
	}
	t.Fatalf("program ran off its end")
	return 0
}

func call(nr uint32, args ...uint64) seccompData {
	d := seccompData{nr: nr, arch: auditArches[runtime.GOARCH]}
	copy(d.args[:], args)
	return d
}

const (
	allow  = unix.SECCOMP_RET_ALLOW
	eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)

	nrGetpid     = unix.SYS_GETPID
	nrUmount2    = unix.SYS_UMOUNT2
	nrLandlock47 = 447
	sigchld      = uint64(unix.SIGCHLD)
	// What the Go runtime passes to clone for a new thread: a filter that
	// refused it would stop the daemon from starting at all.
	goThreadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD
)

func TestProgram(t *testing.T) {
	needFilterArch(t)
	allNew := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWTIME}
	type check struct {
		what string
		d    seccompData
		want uint32
	}
	tests := []struct {
		deny   []string
		errno  syscall.Errno
		checks []check
	}{
		{nil, unix.EPERM, []check{
			{"another architecture", seccompData{nr: nrGetpid, arch: unix.AUDIT_ARCH_I386}, unix.SECCOMP_RET_KILL_PROCESS},
			{"x32 getpid", call(x32Bit | nrGetpid), eperm},
			{"getpid", call(nrGetpid), allow},
			{"clone3 when no clone rule", call(nrClone3), allow},
			{"clone NEWUSER", call(nrClone, unix.CLONE_NEWUSER|sigchld), allow},
		}},
		{[]string{"userns"}, unix.EPERM, []check{
			{"clone NEWUSER", call(nrClone, unix.CLONE_NEWUSER|sigchld), eperm},
			{"unshare NEWUSER|NEWNS", call(nrUnshare, unix.CLONE_NEWUSER|unix.CLONE_NEWNS), eperm},
			{"clone NEWUSER with high bits", call(nrClone, 1<<40|unix.CLONE_NEWUSER), eperm},
			{"clone NEWNET", call(nrClone, unix.CLONE_NEWNET), allow},
			{"unshare NEWNS", call(nrUnshare, unix.CLONE_NEWNS), allow},
			{"clone of a Go thread", call(nrClone, goThreadFlags), allow},
			{"fork", call(nrClone, sigchld), allow},
			{"clone3", call(nrClone3), enosys},
			{"setns", call(nrSetns, 3, 0), allow},
			{"x32 unshare", call(x32Bit|nrUnshare, unix.CLONE_NEWUSER), eperm},
			{"another architecture", seccompData{nr: nrGetpid, arch: unix.AUDIT_ARCH_ARM}, unix.SECCOMP_RET_KILL_PROCESS},
		}},
		{[]string{"netns"}, unix.EPERM, []check{
			{"clone NEWNET", call(nrClone, unix.CLONE_NEWNET|sigchld), eperm},
			{"unshare NEWNET", call(nrUnshare, unix.CLONE_NEWNET), eperm},
			{"unshare NEWUSER", call(nrUnshare, unix.CLONE_NEWUSER), allow},
			{"clone3", call(nrClone3), enosys},
		}},
		{[]string{"namespaces"}, unix.EPERM, []check{
			{"setns", call(nrSetns, 3, 0), eperm},
			{"clone3", call(nrClone3), enosys},
			{"clone of a Go thread", call(nrClone, goThreadFlags), allow},
			{"unshare of files only", call(nrUnshare, unix.CLONE_FILES), allow},
		}},
		{[]string{"landlock"}, unix.EPERM, []check{
			{"landlock_create_ruleset", call(nrLandlockCreateRuleset, 0, 0, 1), eperm},
			{"landlock_add_rule", call(nrLandlockAddRule), eperm},
			{"landlock_restrict_self", call(nrLandlockRestrictSelf), eperm},
			{"syscall 447", call(nrLandlock47), allow},
			{"clone3", call(nrClone3), allow},
		}},
		{[]string{"landlock"}, unix.EOPNOTSUPP, []check{
			{"landlock_create_ruleset", call(nrLandlockCreateRuleset, 0, 0, 1), unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP)},
			{"x32 keeps EPERM", call(x32Bit | nrGetpid), eperm},
		}},
		{[]string{"personality"}, unix.EPERM, []check{
			{"personality query", call(nrPersonality, 0xffffffff), eperm},
			{"getpid", call(nrGetpid), allow},
		}},
		{[]string{"seccomp"}, unix.EPERM, []check{
			{"seccomp", call(nrSeccomp, unix.SECCOMP_SET_MODE_FILTER), eperm},
			{"prctl(PR_SET_SECCOMP)", call(nrPrctl, unix.PR_SET_SECCOMP, 2), eperm},
			// The kernel reads the option as an int.
			{"prctl(PR_SET_SECCOMP) with high bits", call(nrPrctl, 1<<32|unix.PR_SET_SECCOMP, 2), eperm},
			{"prctl(PR_SET_NO_NEW_PRIVS)", call(nrPrctl, unix.PR_SET_NO_NEW_PRIVS, 1), allow},
			{"prctl(PR_GET_SECCOMP)", call(nrPrctl, unix.PR_GET_SECCOMP), allow},
		}},
		{[]string{"loopback"}, unix.EPERM, []check{
			{"SIOCSIFFLAGS", call(nrIoctl, 3, unix.SIOCSIFFLAGS), eperm},
			// The kernel reads the request as 32 bits.
			{"SIOCSIFFLAGS with high bits", call(nrIoctl, 3, 1<<32|unix.SIOCSIFFLAGS), eperm},
			{"SIOCGIFFLAGS", call(nrIoctl, 3, unix.SIOCGIFFLAGS), allow},
			{"fd equal to SIOCSIFFLAGS", call(nrIoctl, unix.SIOCSIFFLAGS, unix.TIOCGWINSZ), allow},
		}},
		{[]string{"mount"}, unix.EPERM, []check{
			{"mount", call(nrMount), eperm},
			{"open_tree", call(nrOpenTree), eperm},
			{"move_mount", call(nrMoveMount), eperm},
			{"fsopen", call(nrFsopen), eperm},
			{"fsconfig", call(nrFsconfig), eperm},
			{"fsmount", call(nrFsmount), eperm},
			{"mount_setattr", call(nrMountSetattr), eperm},
			{"pivot_root", call(nrPivotRoot), eperm},
			{"umount2", call(nrUmount2), allow},
			{"unshare NEWNS", call(nrUnshare, unix.CLONE_NEWNS), allow},
		}},
		{[]string{"userns", "loopback", "seccomp"}, unix.EACCES, []check{
			{"clone NEWUSER", call(nrClone, unix.CLONE_NEWUSER), unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
			{"SIOCSIFFLAGS", call(nrIoctl, 3, unix.SIOCSIFFLAGS), unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
			{"prctl(PR_SET_SECCOMP)", call(nrPrctl, unix.PR_SET_SECCOMP), unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
			{"ioctl on a tty", call(nrIoctl, 0, unix.TCGETS), allow},
			{"prctl(PR_SET_NAME)", call(nrPrctl, unix.PR_SET_NAME), allow},
			{"clone NEWPID", call(nrClone, unix.CLONE_NEWPID), allow},
		}},
	}
	for _, flag := range allNew {
		tests[3].checks = append(tests[3].checks,
			check{fmt.Sprintf("clone flag %#x", flag), call(nrClone, flag|sigchld), eperm},
			check{fmt.Sprintf("unshare flag %#x", flag), call(nrUnshare, flag), eperm})
	}
	for _, tc := range tests {
		prog, err := Program(tc.deny, tc.errno)
		if err != nil {
			t.Fatalf("Program(%q, %v): %v", tc.deny, tc.errno, err)
		}
		for _, c := range tc.checks {
			if strings.HasPrefix(c.what, "x32 ") && runtime.GOARCH != "amd64" {
				// Only amd64 has the x32 ABI.
				continue
			}
			if got := evaluate(t, prog, c.d); got != c.want {
				t.Errorf("deny %q errno %d: %s returns %#x, want %#x", tc.deny, tc.errno, c.what, got, c.want)
			}
		}
	}
}

// Overlapping or repeated names must give one rule each, in one order, so
// that a program can be compared and stays well under the kernel's limit.
func TestProgramMergesNames(t *testing.T) {
	needFilterArch(t)
	a, err := Program([]string{"netns", "userns", "netns"}, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Program([]string{"userns", "netns"}, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Errorf("programs differ by the order or repetition of names:\n%v\n%v", a, b)
	}
	all, err := Program(Names(), unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) > 100 {
		t.Errorf("every denial at once takes %d instructions; expected a few dozen", len(all))
	}
}

func TestProgramRejects(t *testing.T) {
	needFilterArch(t)
	for _, tc := range []struct {
		deny  []string
		errno syscall.Errno
	}{
		{[]string{"userns", "bogus"}, unix.EPERM},
		{[]string{""}, unix.EPERM},
		{[]string{"USERNS"}, unix.EPERM},
		{[]string{"userns"}, 0},
		{[]string{"userns"}, 4096},
	} {
		if _, err := Program(tc.deny, tc.errno); err == nil {
			t.Errorf("Program(%q, %d) succeeded, want an error", tc.deny, tc.errno)
		}
	}
}

func TestParseErrno(t *testing.T) {
	for in, want := range map[string]syscall.Errno{
		"EPERM": unix.EPERM, "eperm": unix.EPERM, "ENOSYS": unix.ENOSYS,
		"EOPNOTSUPP": unix.EOPNOTSUPP, "13": unix.EACCES,
	} {
		if got, err := ParseErrno(in); err != nil || got != want {
			t.Errorf("ParseErrno(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "EBOGUS", "0", "-1", "4096"} {
		if got, err := ParseErrno(in); err == nil {
			t.Errorf("ParseErrno(%q) = %d, want an error", in, got)
		}
	}
}
