package launcherlinux

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
)

// Syscall is a system call the filter names, with its number on the
// architecture the daemon runs on.
type Syscall struct {
	Name string
	Nr   uint32
}

// SeccompRules is what SeccompProgram refuses without a listener, as rules
// on named calls: the form other filter builders take (an OCI runtime's
// libseccomp), read from the same tables as the program so that the two
// cannot drift apart. Calls of another architecture and x32 calls, which
// the program refuses before any of these, are the builder's to refuse.
type SeccompRules struct {
	// Arch is the architecture the numbers are for, as GOARCH names it,
	// and AuditArch its AUDIT_ARCH_* value, which a filter compares
	// seccomp_data.arch with.
	Arch      string
	AuditArch uint32
	// Denied fail with EPERM whatever their arguments.
	Denied []Syscall
	// NoSys fail with ENOSYS: clone3, whose flags the filter cannot read,
	// so that the C library falls back to clone.
	NoSys []Syscall
	// Clone fails with EPERM when its first argument has any of
	// CloneDeniedFlags.
	Clone            Syscall
	CloneDeniedFlags uint32
	// Ioctl fails with EPERM for each request in DeniedIoctls, compared on
	// the low 32 bits of its second argument, which is all the kernel
	// reads.
	Ioctl        Syscall
	DeniedIoctls []uint32
	// Socket fails with EPERM for a first argument not in SocketFamilies,
	// when RestrictSockets is set.
	Socket          Syscall
	RestrictSockets bool
	SocketFamilies  []uint32
}

// SeccompRulesFor is the listener-less filter for o. Options that need
// the daemon holding the listener (Notify and what rests on it) and
// NoSetID, whose refusal the daemon records, are refused: rules without a
// daemon could only drop them.
func SeccompRulesFor(o SeccompOptions) (*SeccompRules, error) {
	if o.Notify || o.NotifyConnect || o.NotifyLookups || o.UnixStream || o.NoSetID {
		return nil, errors.New("seccomp rules: notification and set-ID refusal need the daemon holding the listener")
	}
	if seccompArch != runtime.GOARCH {
		return nil, fmt.Errorf("seccomp rules: sandboxd has syscall tables for amd64 and arm64 only, not %s", runtime.GOARCH)
	}
	r := &SeccompRules{
		Arch:             seccompArch,
		AuditArch:        auditArch,
		NoSys:            []Syscall{{"clone3", nrClone3}},
		Clone:            Syscall{"clone", nrClone},
		CloneDeniedFlags: cloneNewFlags,
		Ioctl:            Syscall{"ioctl", nrIoctl},
		DeniedIoctls:     []uint32{tiocsti, tioclinux},
		Socket:           Syscall{"socket", nrSocket},
	}
	for _, s := range deniedCalls() {
		r.Denied = append(r.Denied, Syscall{s.name, s.nr})
	}
	if o.NoSysVIPC {
		for _, s := range sysVIPCCalls() {
			r.Denied = append(r.Denied, Syscall{s.name, s.nr})
		}
	}
	switch {
	case o.NoSockets:
		r.Denied = append(r.Denied, r.Socket)
	case o.RestrictSocketFamilies:
		// Unix sockets, which NoUnixSockets refuses, are outside these
		// families too.
		r.RestrictSockets = true
		r.SocketFamilies = []uint32{afInet, afInet6, afNetlink}
	case o.NoUnixSockets:
		return nil, errors.New("seccomp rules: refusing the unix family alone is not a rule on allowed families")
	}
	slices.SortFunc(r.Denied, func(a, b Syscall) int { return int(a.Nr) - int(b.Nr) })
	return r, nil
}
