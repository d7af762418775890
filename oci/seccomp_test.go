package oci

import (
	"runtime"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandboxd/sandboxd/internal/bpfrun"
	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
)

// verdict is what a filter answers a call: 0 for allow, else the errno.
type verdict uint32

const killed verdict = 1 << 31

// bpfVerdict runs sandboxd's classic BPF program over a struct
// seccomp_data of arch, with the instructions SeccompProgram emits.
func bpfVerdict(t *testing.T, prog []launcherlinux.SockFilter, arch, nr uint32, args [6]uint64) verdict {
	t.Helper()
	v, err := bpfrun.Verdict(prog, bpfrun.Data(arch, nr, args[:]...))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case v == 0x7fff0000:
		return 0
	case v&0xffff0000 == 0x00050000:
		return verdict(v & 0xffff)
	default:
		return killed
	}
}

// ociVerdict is what libseccomp makes of the rules: a rule matches when
// every one of its comparisons holds on the 64-bit argument; the first
// match (all are errno actions) answers.
func ociVerdict(t *testing.T, s *specs.LinuxSeccomp, name string, args [6]uint64) verdict {
	t.Helper()
	if s.DefaultAction != specs.ActAllow {
		t.Fatalf("default action %s", s.DefaultAction)
	}
	for _, r := range s.Syscalls {
		named := false
		for _, n := range r.Names {
			named = named || n == name
		}
		if !named {
			continue
		}
		match := true
		for _, a := range r.Args {
			v := args[a.Index]
			switch a.Op {
			case specs.OpEqualTo:
				match = match && v == a.Value
			case specs.OpLessThan:
				match = match && v < a.Value
			case specs.OpGreaterThan:
				match = match && v > a.Value
			case specs.OpMaskedEqual:
				match = match && v&a.Value == a.ValueTwo
			default:
				t.Fatalf("rule %v: operator %s", r.Names, a.Op)
			}
		}
		if match {
			if r.Action != specs.ActErrno || r.ErrnoRet == nil {
				t.Fatalf("rule %v: action %s", r.Names, r.Action)
			}
			return verdict(*r.ErrnoRet)
		}
	}
	return 0
}

// TestSeccompEqualsProgram puts every syscall number, with the
// arguments the program looks at, to both filters: the OCI rules must
// answer as the program does, and where the program reads only the low
// 32 bits of an argument that has high bits, never allow what it
// refuses.
func TestSeccompEqualsProgram(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("sandboxd's filter exists for amd64 and arm64 only; this is %s", runtime.GOARCH)
	}
	for _, netns := range []bool{false, true} {
		prog, err := launcherlinux.SeccompProgram(launcherlinux.SeccompOptions{RestrictSocketFamilies: netns})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Seccomp(netns)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := launcherlinux.SeccompRulesFor(launcherlinux.SeccompOptions{RestrictSocketFamilies: netns})
		if err != nil {
			t.Fatal(err)
		}
		names := map[uint32]string{rules.Clone.Nr: rules.Clone.Name, rules.Ioctl.Nr: rules.Ioctl.Name, rules.Socket.Nr: rules.Socket.Name}
		for _, l := range [][]launcherlinux.Syscall{rules.Denied, rules.NoSys} {
			for _, sc := range l {
				names[sc.Nr] = sc.Name
			}
		}
		// Every name the config uses must be one the table numbers.
		known := map[string]bool{}
		for _, n := range names {
			known[n] = true
		}
		for _, r := range s.Syscalls {
			for _, n := range r.Names {
				if !known[n] {
					t.Fatalf("rule names %q, which no table of the filter numbers", n)
				}
			}
		}
		var argSets [][6]uint64
		argSets = append(argSets, [6]uint64{})
		for bit := 0; bit < 64; bit++ {
			argSets = append(argSets, [6]uint64{1 << bit})
		}
		for fam := uint64(0); fam < 50; fam++ {
			argSets = append(argSets, [6]uint64{fam, 1}, [6]uint64{fam | 1<<32, 1})
		}
		for _, req := range []uint64{0x5412, 0x541c, 0x5401, 0x5412 | 1<<32, 0x541c | 0xffff_0000_0000_0000} {
			argSets = append(argSets, [6]uint64{0, req})
		}
		checked := 0
		for nr := uint32(0); nr < 512; nr++ {
			for _, args := range argSets {
				want := bpfVerdict(t, prog, rules.AuditArch, nr, args)
				name, ok := names[nr]
				if !ok {
					if want != 0 {
						t.Fatalf("netns %v: syscall %d refused (%d) by the program, named by no rule", netns, nr, want)
					}
					continue
				}
				got := ociVerdict(t, s, name, args)
				checked++
				highBits := args[0]>>32 != 0 || args[1]>>32 != 0
				switch {
				case got == want:
				case highBits && want == 0 && got != 0:
					// Stricter: the program reads the low word only.
				default:
					t.Fatalf("netns %v: %s(%#x, %#x): program answers %d, OCI rules %d", netns, name, args[0], args[1], want, got)
				}
			}
		}
		if checked == 0 {
			t.Fatal("no call checked")
		}
	}
}
