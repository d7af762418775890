package sandboxinit

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"path"
	"slices"
	"strings"
)

// The init is a C program (cmd/sandboxd-init) that parses no JSON: the
// plan reaches it as a magic number followed by records, each a tag byte,
// a little-endian uint32 length and that many bytes. A string is its
// bytes and a terminating NUL, which the decoder checks, so that it can
// use them in place; a string holding a NUL cannot be encoded, as no
// path, argument or variable the kernel takes can hold one. The decoder
// (plan.c) refuses unknown tags, records of the wrong size, plans
// missing a required record and, as the encoder does, an ID-mapped mount
// step whose target is the sandbox's root. FormatPlan is the text both sides print for
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

// maxCgroupTasks is the most cgroup files the init takes (PassCgroup): it
// receives them in one message. The decoder refuses more.
const maxCgroupTasks = 16

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
	mountShared   = 1 << 3
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

// encoder appends the records to one buffer, each in place: a launch
// encodes a plan of tens of kilobytes, and a copy per string was most of
// the cost.
type encoder struct {
	b   []byte
	err error
}

// begin starts a record of tag, whose length end fills in.
func (e *encoder) begin(tag byte) int {
	e.b = append(e.b, tag, 0, 0, 0, 0)
	return len(e.b)
}

func (e *encoder) end(start int) {
	binary.LittleEndian.PutUint32(e.b[start-4:], uint32(len(e.b)-start))
}

func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

// cstring appends s with its NUL, or sets the error for a string that
// holds one.
func (e *encoder) cstring(what, s string) {
	if strings.IndexByte(s, 0) >= 0 && e.err == nil {
		e.err = fmt.Errorf("%s %q holds a NUL byte", what, s)
	}
	e.b = append(append(e.b, s...), 0)
}

func (e *encoder) str(tag byte, what, s string) {
	r := e.begin(tag)
	e.cstring(what, s)
	e.end(r)
}

// MarshalBinary encodes the plan for the C init.
func (p *Plan) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(nil)
}

// AppendBinary appends the plan's encoding for the C init to b, so that a
// daemon can encode each launch's plan into a buffer it reuses.
func (p *Plan) AppendBinary(b []byte) ([]byte, error) {
	x := &p.Exec
	size := len(planMagic) + 64 + 8*len(x.Seccomp)
	for _, s := range p.Mounts {
		size += 32 + len(s.Source) + len(s.Target) + len(s.Content) + len(s.Field) + len(s.Via)
	}
	for _, l := range [][]string{x.Argv, x.Env, x.Landlock.ReadExcept, x.WriteRoots} {
		for _, v := range l {
			size += 6 + len(v)
		}
	}
	for _, r := range x.Landlock.Rules {
		size += 14 + len(r.Path)
	}
	e := &encoder{b: append(slices.Grow(b, size+256), planMagic...)}
	var flags uint32
	for _, f := range []struct {
		on  bool
		bit uint32
	}{{p.Namespaces, flagNamespaces}, {p.NetNS, flagNetNS}, {x.Terminal, flagTerminal}, {x.TerminalRule, flagTerminalRule}, {x.Listener, flagListener}, {x.Landlock.Strict, flagStrict}} {
		if f.on {
			flags |= f.bit
		}
	}
	r := e.begin(tagFlags)
	e.u32(flags)
	e.end(r)
	e.str(tagHostname, "hostname", p.Hostname)
	if p.ProxyListen != "" {
		ap, err := netip.ParseAddrPort(p.ProxyListen)
		if err != nil || !ap.Addr().Is4() {
			return nil, fmt.Errorf("proxy address %q is not IPv4 address:port", p.ProxyListen)
		}
		a := ap.Addr().As4()
		r := e.begin(tagProxy)
		e.b = append(e.b, a[:]...)
		e.u16(ap.Port())
		e.end(r)
	}
	for _, port := range p.LoopbackForwards {
		r := e.begin(tagForward)
		e.u16(port)
		e.end(r)
	}
	for _, s := range p.Mounts {
		kind, ok := mountKindNumber(s.Kind)
		if !ok {
			return nil, fmt.Errorf("unknown mount step %q", s.Kind)
		}
		if s.Idmapped && path.Clean("/"+s.Target) == "/" {
			// Stacked on the sandbox's root, the clone would hide every
			// step after it; the decoder refuses it too.
			return nil, fmt.Errorf("ID-mapped mount step of %q targets the sandbox's root", s.Source)
		}
		if s.Idmapped && !strings.HasPrefix(s.Field, "filesystem.") {
			// Only a filesystem field's target is opened without
			// following symlinks, which might lead to the root.
			return nil, fmt.Errorf("ID-mapped mount step of %q serves %q, no filesystem field; the decoder refuses it too", s.Source, s.Field)
		}
		if s.Shared && (s.Kind != MountFile || s.Content != "" || s.Idmapped) {
			// The init attaches what the daemon sends for a file step
			// alone; the decoder refuses it too.
			return nil, fmt.Errorf("shared mount step of %q is not an unmapped file step without content", s.Target)
		}
		if s.Shared && s.Source != "" {
			// The init finds an ID-mapped clone by its step's source: a
			// shared step with one could be taken for it. The decoder
			// refuses it too.
			return nil, fmt.Errorf("shared mount step of %q has a source, %q", s.Target, s.Source)
		}
		var mf byte
		for _, f := range []struct {
			on  bool
			bit byte
		}{{s.ReadOnly, mountReadOnly}, {s.Optional, mountOptional}, {s.Idmapped, mountIdmapped}, {s.Shared, mountShared}} {
			if f.on {
				mf |= f.bit
			}
		}
		r := e.begin(tagMount)
		e.b = append(e.b, kind, mf)
		e.u32(s.Mode)
		for _, str := range []string{s.Source, s.Target, s.Content, s.Field, s.Via} {
			e.u32(uint32(len(str) + 1))
			e.cstring("mount step", str)
		}
		e.end(r)
	}
	for _, a := range x.Argv {
		e.str(tagArg, "argument", a)
	}
	for _, v := range x.Env {
		e.str(tagEnv, "environment variable", v)
	}
	e.str(tagCwd, "working directory", x.Cwd)
	if x.CgroupTasks < 0 || x.CgroupTasks > maxCgroupTasks {
		return nil, fmt.Errorf("%d cgroup files to join, the init takes 0 to %d; the decoder refuses it too", x.CgroupTasks, maxCgroupTasks)
	}
	if x.Landlock.ABI < 0 || x.Landlock.ABI > math.MaxInt32 {
		return nil, fmt.Errorf("landlock ABI %d is beyond any kernel's; the decoder refuses it too", x.Landlock.ABI)
	}
	r = e.begin(tagIDs)
	e.u32(x.UID)
	e.u32(x.GID)
	e.u16(x.Rows)
	e.u16(x.Cols)
	e.u32(uint32(x.CgroupTasks))
	e.end(r)
	ll := &x.Landlock
	r = e.begin(tagLandlock)
	e.u32(uint32(ll.ABI))
	e.u64(ll.HandledFS)
	e.u64(ll.Scoped)
	e.u64(ll.ReadAccess)
	e.end(r)
	for _, rule := range ll.Rules {
		r := e.begin(tagLLRule)
		e.u64(rule.Access)
		e.cstring("landlock rule", rule.Path)
		e.end(r)
	}
	for _, p := range ll.ReadExcept {
		e.str(tagLLExcept, "landlock exception", p)
	}
	if len(x.Seccomp) > 0 {
		r := e.begin(tagSeccomp)
		for _, f := range x.Seccomp {
			e.u16(f.Code)
			e.b = append(e.b, f.Jt, f.Jf)
			e.u32(f.K)
		}
		e.end(r)
	}
	for _, w := range x.WriteRoots {
		e.str(tagWriteRoot, "write root", w)
	}
	e.end(e.begin(tagEnd))
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
		fmt.Fprintf(&b, "mount %s ro %t optional %t idmapped %t shared %t mode %o source [%x] target [%x] content [%x] field [%x] via [%x]\n",
			s.Kind, s.ReadOnly, s.Optional, s.Idmapped, s.Shared, s.Mode, s.Source, s.Target, s.Content, s.Field, s.Via)
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
