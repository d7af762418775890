package sandboxinit

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// The init is a C program (cmd/sandboxd-init) that parses no JSON: the
// plan reaches it as a magic number followed by records, each a tag byte,
// a little-endian uint32 length and that many bytes. A string is its
// bytes and a terminating NUL, which the decoder checks, so that it can
// use them in place; a string holding a NUL cannot be encoded, as no
// path, argument or variable the kernel takes can hold one. The decoder
// (plan.c) refuses unknown tags, records of the wrong size and plans
// missing a required record. FormatPlan is the text both sides print for
// a plan, which the tests compare.

// planMagic starts every encoded plan; its last byte is the version.
const planMagic = "SBP\x01"

// Record tags; plan.h has the same numbers.
const (
	tagFlags     = 1  // uint32 of the flag bits below
	tagHostname  = 2  // string
	tagProxy     = 3  // IPv4 address, then uint16 port
	tagForward   = 4  // uint16 port, one record each
	tagMount     = 5  // MountStep, see appendMount
	tagArg       = 6  // string, one record each, in order
	tagEnv       = 7  // string, one record each, in order
	tagCwd       = 8  // string
	tagIDs       = 9  // uid, gid uint32; rows, cols uint16; cgroup tasks uint32
	tagLandlock  = 10 // abi uint32; handled, scoped, read access uint64
	tagLLRule    = 11 // access uint64, then the path string
	tagLLExcept  = 12 // string
	tagSeccomp   = 13 // struct sock_filter records, eight bytes each
	tagWriteRoot = 14 // string
	tagEnd       = 15 // empty, the last record: a plan cut short is refused
)

// Flag bits of tagFlags.
const (
	flagNamespaces   = 1 << 0
	flagNetNS        = 1 << 1
	flagTerminal     = 1 << 2
	flagTerminalRule = 1 << 3
	flagListener     = 1 << 4
	flagStrict       = 1 << 5
)

// Flag bits of a mount record.
const (
	mountReadOnly = 1 << 0
	mountOptional = 1 << 1
	mountIdmapped = 1 << 2
)

// mountKinds numbers the mount kinds, from 1, for the C side.
var mountKinds = []MountKind{
	MountRootReadOnly, MountBind, MountDevice, MountRebindReadOnly, MountPin, MountTmpfs,
	MountProc, MountDevpts, MountMaskFile, MountSymlink, MountFile, MountPlaceholder,
}

func mountKindNumber(k MountKind) (byte, bool) {
	for i, m := range mountKinds {
		if m == k {
			return byte(i + 1), true
		}
	}
	return 0, false
}

type encoder struct {
	b   []byte
	err error
}

func (e *encoder) record(tag byte, payload []byte) {
	e.b = append(e.b, tag)
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(payload)))
	e.b = append(e.b, payload...)
}

// cstring is s with its NUL, or an error for a string that holds one.
func (e *encoder) cstring(what, s string) []byte {
	if strings.IndexByte(s, 0) >= 0 && e.err == nil {
		e.err = fmt.Errorf("%s %q holds a NUL byte", what, s)
	}
	return append([]byte(s), 0)
}

func (e *encoder) str(tag byte, what, s string) { e.record(tag, e.cstring(what, s)) }

// MarshalBinary encodes the plan for the C init.
func (p *Plan) MarshalBinary() ([]byte, error) {
	e := &encoder{b: []byte(planMagic)}
	x := &p.Exec
	var flags uint32
	for _, f := range []struct {
		on  bool
		bit uint32
	}{{p.Namespaces, flagNamespaces}, {p.NetNS, flagNetNS}, {x.Terminal, flagTerminal}, {x.TerminalRule, flagTerminalRule}, {x.Listener, flagListener}, {x.Landlock.Strict, flagStrict}} {
		if f.on {
			flags |= f.bit
		}
	}
	e.record(tagFlags, binary.LittleEndian.AppendUint32(nil, flags))
	e.str(tagHostname, "hostname", p.Hostname)
	if p.ProxyListen != "" {
		ap, err := netip.ParseAddrPort(p.ProxyListen)
		if err != nil || !ap.Addr().Is4() {
			return nil, fmt.Errorf("proxy address %q is not IPv4 address:port", p.ProxyListen)
		}
		a := ap.Addr().As4()
		e.record(tagProxy, binary.LittleEndian.AppendUint16(a[:], ap.Port()))
	}
	for _, port := range p.LoopbackForwards {
		e.record(tagForward, binary.LittleEndian.AppendUint16(nil, port))
	}
	for _, s := range p.Mounts {
		kind, ok := mountKindNumber(s.Kind)
		if !ok {
			return nil, fmt.Errorf("unknown mount step %q", s.Kind)
		}
		var mf byte
		for _, f := range []struct {
			on  bool
			bit byte
		}{{s.ReadOnly, mountReadOnly}, {s.Optional, mountOptional}, {s.Idmapped, mountIdmapped}} {
			if f.on {
				mf |= f.bit
			}
		}
		b := append([]byte{kind, mf}, binary.LittleEndian.AppendUint32(nil, s.Mode)...)
		for _, str := range []string{s.Source, s.Target, s.Content, s.Field, s.Via} {
			c := e.cstring("mount step", str)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(c)))
			b = append(b, c...)
		}
		e.record(tagMount, b)
	}
	for _, a := range x.Argv {
		e.str(tagArg, "argument", a)
	}
	for _, v := range x.Env {
		e.str(tagEnv, "environment variable", v)
	}
	e.str(tagCwd, "working directory", x.Cwd)
	ids := binary.LittleEndian.AppendUint32(nil, x.UID)
	ids = binary.LittleEndian.AppendUint32(ids, x.GID)
	ids = binary.LittleEndian.AppendUint16(ids, x.Rows)
	ids = binary.LittleEndian.AppendUint16(ids, x.Cols)
	ids = binary.LittleEndian.AppendUint32(ids, uint32(x.CgroupTasks))
	e.record(tagIDs, ids)
	ll := &x.Landlock
	lb := binary.LittleEndian.AppendUint32(nil, uint32(ll.ABI))
	lb = binary.LittleEndian.AppendUint64(lb, ll.HandledFS)
	lb = binary.LittleEndian.AppendUint64(lb, ll.Scoped)
	lb = binary.LittleEndian.AppendUint64(lb, ll.ReadAccess)
	e.record(tagLandlock, lb)
	for _, r := range ll.Rules {
		e.record(tagLLRule, append(binary.LittleEndian.AppendUint64(nil, r.Access), e.cstring("landlock rule", r.Path)...))
	}
	for _, p := range ll.ReadExcept {
		e.str(tagLLExcept, "landlock exception", p)
	}
	if len(x.Seccomp) > 0 {
		raw := make([]byte, 0, 8*len(x.Seccomp))
		for _, f := range x.Seccomp {
			raw = binary.LittleEndian.AppendUint16(raw, f.Code)
			raw = append(raw, f.Jt, f.Jf)
			raw = binary.LittleEndian.AppendUint32(raw, f.K)
		}
		e.record(tagSeccomp, raw)
	}
	for _, w := range x.WriteRoots {
		e.str(tagWriteRoot, "write root", w)
	}
	e.record(tagEnd, nil)
	if e.err != nil {
		return nil, e.err
	}
	if len(x.Argv) == 0 {
		return nil, fmt.Errorf("plan has no command")
	}
	return e.b, nil
}

// FormatPlan prints p as the C decoder's test harness prints what it
// decoded: one line a field, strings as hexadecimal bytes in brackets, lists in
// order.
func FormatPlan(p *Plan) string {
	var b strings.Builder
	x := &p.Exec
	ll := &x.Landlock
	fmt.Fprintf(&b, "namespaces %t netns %t terminal %t terminal_rule %t listener %t strict %t\n",
		p.Namespaces, p.NetNS, x.Terminal, x.TerminalRule, x.Listener, ll.Strict)
	fmt.Fprintf(&b, "hostname [%x]\n", p.Hostname)
	if p.ProxyListen != "" {
		fmt.Fprintf(&b, "proxy %s\n", p.ProxyListen)
	}
	for _, port := range p.LoopbackForwards {
		fmt.Fprintf(&b, "forward %d\n", port)
	}
	for _, s := range p.Mounts {
		fmt.Fprintf(&b, "mount %s ro %t optional %t idmapped %t mode %o source [%x] target [%x] content [%x] field [%x] via [%x]\n",
			s.Kind, s.ReadOnly, s.Optional, s.Idmapped, s.Mode, s.Source, s.Target, s.Content, s.Field, s.Via)
	}
	for _, a := range x.Argv {
		fmt.Fprintf(&b, "arg [%x]\n", a)
	}
	for _, v := range x.Env {
		fmt.Fprintf(&b, "env [%x]\n", v)
	}
	fmt.Fprintf(&b, "cwd [%x]\n", x.Cwd)
	fmt.Fprintf(&b, "uid %d gid %d rows %d cols %d cgroup_tasks %d\n", x.UID, x.GID, x.Rows, x.Cols, uint32(x.CgroupTasks))
	fmt.Fprintf(&b, "landlock abi %d handled %#x scoped %#x read_access %#x\n", uint32(ll.ABI), ll.HandledFS, ll.Scoped, ll.ReadAccess)
	for _, r := range ll.Rules {
		fmt.Fprintf(&b, "rule %#x [%x]\n", r.Access, r.Path)
	}
	for _, e := range ll.ReadExcept {
		fmt.Fprintf(&b, "except [%x]\n", e)
	}
	for _, f := range x.Seccomp {
		fmt.Fprintf(&b, "bpf %#x %d %d %#x\n", f.Code, f.Jt, f.Jf, f.K)
	}
	for _, w := range x.WriteRoots {
		fmt.Fprintf(&b, "write_root [%x]\n", w)
	}
	return b.String()
}
