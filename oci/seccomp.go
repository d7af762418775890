package oci

import (
	"errors"
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
)

const (
	errnoEPERM  uint = 1
	errnoENOSYS uint = 38
	// low32 masks an argument the kernel reads as a 32-bit int, which
	// libseccomp would otherwise compare in all 64 bits: a request with
	// high bits set would slip past an equality on the whole.
	low32 = 0xffffffff
)

// Seccomp is sandboxd's filter, without a listener, as OCI rules: the
// namespaces set's, restricting socket families when the sandbox has a
// network namespace of its own. Calls of other architectures and x32
// calls, which sandboxd's filter kills or refuses with EPERM, are left to
// the runtime's libseccomp, which kills the thread that makes a call of
// an architecture the config does not list (measured with runc 1.1.5 and
// libseccomp 2.5.4: an x32 getpid).
func Seccomp(netns bool) (*specs.LinuxSeccomp, error) {
	r, err := launcherlinux.SeccompRulesFor(launcherlinux.SeccompOptions{RestrictSocketFamilies: netns})
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	eperm, enosys := errnoEPERM, errnoENOSYS
	rule := func(errno *uint, name string, args ...specs.LinuxSeccompArg) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: errno, Args: args}
	}
	denied := specs.LinuxSyscall{Action: specs.ActErrno, ErrnoRet: &eperm}
	for _, s := range r.Denied {
		denied.Names = append(denied.Names, s.Name)
	}
	arch, ok := map[string]specs.Arch{"amd64": specs.ArchX86_64, "arm64": specs.ArchAARCH64}[r.Arch]
	if !ok {
		return nil, fmt.Errorf("seccomp: no OCI name for the architecture %s", r.Arch)
	}
	out := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{arch},
		Syscalls:      []specs.LinuxSyscall{denied},
	}
	for _, s := range r.NoSys {
		out.Syscalls = append(out.Syscalls, rule(&enosys, s.Name))
	}
	// One rule a flag: libseccomp's masked equality asks for all of the
	// mask's bits, and any one of them makes a namespace.
	for bit := uint64(1); bit <= 1<<31; bit <<= 1 {
		if uint64(r.CloneDeniedFlags)&bit != 0 {
			out.Syscalls = append(out.Syscalls, rule(&eperm, r.Clone.Name, specs.LinuxSeccompArg{Index: 0, Value: bit, ValueTwo: bit, Op: specs.OpMaskedEqual}))
		}
	}
	for _, req := range r.DeniedIoctls {
		out.Syscalls = append(out.Syscalls, rule(&eperm, r.Ioctl.Name, specs.LinuxSeccompArg{Index: 1, Value: low32, ValueTwo: uint64(req), Op: specs.OpMaskedEqual}))
	}
	if r.RestrictSockets {
		// Every family but the allowed ones, one comparison a rule, which
		// is all libseccomp takes on one argument: below the first, each
		// between two, above the last. Compared in 64 bits, so a family
		// with high bits set is refused too.
		fams := slices.Sorted(slices.Values(r.SocketFamilies))
		if len(fams) == 0 {
			return nil, errors.New("seccomp: socket families restricted to none")
		}
		sock := func(op specs.LinuxSeccompOperator, v uint64) {
			out.Syscalls = append(out.Syscalls, rule(&eperm, r.Socket.Name, specs.LinuxSeccompArg{Index: 0, Value: v, Op: op}))
		}
		sock(specs.OpLessThan, uint64(fams[0]))
		for i := 1; i < len(fams); i++ {
			for v := fams[i-1] + 1; v < fams[i]; v++ {
				sock(specs.OpEqualTo, uint64(v))
			}
		}
		sock(specs.OpGreaterThan, uint64(fams[len(fams)-1]))
	}
	return out, nil
}
