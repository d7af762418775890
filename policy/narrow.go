package policy

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Narrow returns the policy a child sandbox runs under: what the child asks
// for, provided it is nowhere wider than the parent, or a *WidenError naming
// the first child field that would widen. The result is normalized, and
// Narrow(parent, result) returns result again.
//
// child is taken as asked: pass it not normalized, because normalizing
// turns "omitted" into explicit defaults. One rule: each field the child
// leaves out is the parent's, and each field it gives is narrowed against
// the parent's. The child is validated with what it inherits, so a
// read_only or deny entry alone is checked against the parent's write
// roots:
//
//   - A nil child, or a nil submessage of it (filesystem, network, limits,
//     children), inherits the parent's, so an empty child gets exactly the
//     normalized parent.
//   - filesystem.read unspecified inherits the parent's read; under a LISTED
//     parent the child may read the parent's read roots and write roots.
//     ALL under a LISTED parent widens. LISTED read roots must each lie
//     within a parent read root or write root when the parent is LISTED.
//   - filesystem.write empty inherits the parent's write roots; each root
//     the child gives must lie within a parent write root and not within a
//     parent read_only or deny entry.
//   - The result always carries every parent deny entry and every parent
//     read_only entry that lies within one of its write roots, in addition
//     to the child's own: a child cannot lift them, only add to them.
//   - network.mode orders NONE < ALLOWLIST < HOST; unspecified inherits the
//     parent's mode and allow list, and ALLOWLIST without entries under an
//     ALLOWLIST parent inherits the parent's entries. Under an ALLOWLIST
//     parent every child allow entry must be admitted by a parent entry
//     (see MatchHost; port 0 means any port).
//   - Each limit that the child leaves at 0 (or timeout unset or zero)
//     inherits the parent's; a limit the child sets must not exceed the
//     parent's, where the parent's 0 means unlimited.
//   - children.allow true under a parent with false widens; a children
//     message with allow false is a child giving it up, not leaving it out.
//
// If child is invalid, Narrow returns its *FieldError; an invalid parent is
// reported wrapped.
func Narrow(parent, child *sandboxdv1.Policy) (*sandboxdv1.Policy, error) {
	if err := Validate(parent); err != nil {
		return nil, fmt.Errorf("parent policy: %w", err)
	}
	par := Normalize(parent)
	child = inherited(par, child)
	if err := Validate(child); err != nil {
		return nil, err
	}
	fs, err := narrowFilesystem(par.GetFilesystem(), child.GetFilesystem())
	if err != nil {
		return nil, err
	}
	network, err := narrowNetwork(par.GetNetwork(), child.GetNetwork())
	if err != nil {
		return nil, err
	}
	limits, err := narrowLimits(par.GetLimits(), child.GetLimits())
	if err != nil {
		return nil, err
	}
	children := par.GetChildren()
	if c := child.GetChildren(); c != nil {
		if c.GetAllow() && !children.GetAllow() {
			return nil, &WidenError{Field: FieldChildrenAllow, Msg: "true, but the parent may not start child sandboxes"}
		}
		children = c
	}
	return Normalize(&sandboxdv1.Policy{Filesystem: fs, Network: network, Limits: limits, Children: children}), nil
}

// inherited is child with the lists it leaves out filled in from the
// normalized parent par: its write roots, and the allow list of an
// ALLOWLIST under an ALLOWLIST parent. What narrowFilesystem, narrowNetwork
// and narrowLimits inherit themselves (nil messages, unspecified read and
// mode, zero limits) is left to them. child is not changed.
func inherited(par, child *sandboxdv1.Policy) *sandboxdv1.Policy {
	if child == nil {
		return nil
	}
	c := proto.Clone(child).(*sandboxdv1.Policy)
	if fs := c.GetFilesystem(); fs != nil && len(fs.GetWrite()) == 0 {
		fs.Write = slices.Clone(par.GetFilesystem().GetWrite())
	}
	if n := c.GetNetwork(); n.GetMode() == sandboxdv1.Network_ALLOWLIST && len(n.GetAllow()) == 0 && par.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
		for _, a := range par.GetNetwork().GetAllow() {
			n.Allow = append(n.Allow, proto.Clone(a).(*sandboxdv1.NetworkAllow))
		}
	}
	return c
}

// narrowFilesystem narrows child c against the normalized parent par.
func narrowFilesystem(par, c *sandboxdv1.Filesystem) (*sandboxdv1.Filesystem, error) {
	if c == nil {
		return par, nil
	}
	parListed := par.GetRead() == sandboxdv1.Filesystem_LISTED
	out := &sandboxdv1.Filesystem{
		Read:      c.GetRead(),
		ReadRoots: c.GetReadRoots(),
		Write:     c.GetWrite(),
		ReadOnly:  slices.Concat(c.GetReadOnly(), par.GetReadOnly()),
		Deny:      slices.Concat(c.GetDeny(), par.GetDeny()),
	}
	switch c.GetRead() {
	case sandboxdv1.Filesystem_READ_UNSPECIFIED:
		out.Read = par.GetRead()
		if parListed {
			out.ReadRoots = slices.Concat(par.GetReadRoots(), par.GetWrite())
		}
	case sandboxdv1.Filesystem_ALL:
		if parListed {
			return nil, &WidenError{Field: FieldFilesystemRead, Msg: "ALL, but the parent reads only LISTED roots"}
		}
	case sandboxdv1.Filesystem_LISTED:
		if parListed {
			for i, r := range c.GetReadRoots() {
				cr := filepath.Clean(r)
				if withinAny(cr, par.GetReadRoots()) < 0 && withinAny(cr, par.GetWrite()) < 0 {
					return nil, &WidenError{Field: Index(FieldFilesystemReadRoots, i), Msg: fmt.Sprintf("%q is not within any read root or write root of the parent", r)}
				}
			}
		}
	}
	if len(c.GetLayer()) > 0 {
		// The daemon layers host paths; a child's view of them is its
		// parent's, which no layer of the host's could stand for.
		return nil, &WidenError{Field: "filesystem.layer", Msg: "set, but a child sandbox cannot have layers"}
	}
	for i, w := range c.GetWrite() {
		field := Index(FieldFilesystemWrite, i)
		cw := filepath.Clean(w)
		if withinAny(cw, par.GetWrite()) < 0 {
			return nil, &WidenError{Field: field, Msg: fmt.Sprintf("%q is not within any write root of the parent", w)}
		}
		if j := withinAny(cw, par.GetReadOnly()); j >= 0 {
			return nil, &WidenError{Field: field, Msg: fmt.Sprintf("%q lies within the parent's read-only %q", w, par.GetReadOnly()[j])}
		}
		if j := withinAny(cw, par.GetDeny()); j >= 0 {
			return nil, &WidenError{Field: field, Msg: fmt.Sprintf("%q lies within the parent's denied %q", w, par.GetDeny()[j])}
		}
	}
	return out, nil
}

// modeRank orders network modes from narrowest to widest.
var modeRank = map[sandboxdv1.Network_Mode]int{
	sandboxdv1.Network_NONE:      0,
	sandboxdv1.Network_ALLOWLIST: 1,
	sandboxdv1.Network_HOST:      2,
}

// narrowNetwork narrows child c against the normalized parent par.
func narrowNetwork(par, c *sandboxdv1.Network) (*sandboxdv1.Network, error) {
	if c == nil || c.GetMode() == sandboxdv1.Network_MODE_UNSPECIFIED {
		return par, nil
	}
	if modeRank[c.GetMode()] > modeRank[par.GetMode()] {
		return nil, &WidenError{Field: FieldNetworkMode, Msg: fmt.Sprintf("%v, but the parent allows only %v", c.GetMode(), par.GetMode())}
	}
	if par.GetMode() == sandboxdv1.Network_ALLOWLIST {
		for i, a := range c.GetAllow() {
			if !slices.ContainsFunc(par.GetAllow(), func(pa *sandboxdv1.NetworkAllow) bool { return admits(pa, a) }) {
				return nil, &WidenError{Field: Index(FieldNetworkAllow, i), Msg: fmt.Sprintf("host %q port %d is not admitted by any network.allow entry of the parent", a.GetHost(), a.GetPort())}
			}
		}
	}
	return c, nil
}

// narrowLimits narrows child c against the normalized parent par.
func narrowLimits(par, c *sandboxdv1.Limits) (*sandboxdv1.Limits, error) {
	if c == nil {
		return par, nil
	}
	out := &sandboxdv1.Limits{}
	var err error
	if out.Timeout, err = narrowTimeout(par.GetTimeout(), c.GetTimeout()); err != nil {
		return nil, err
	}
	if out.MemoryBytes, err = narrowLimit(FieldLimitsMemoryBytes, par.GetMemoryBytes(), c.GetMemoryBytes()); err != nil {
		return nil, err
	}
	pids, err := narrowLimit(FieldLimitsPids, uint64(par.GetPids()), uint64(c.GetPids()))
	if err != nil {
		return nil, err
	}
	cpu, err := narrowLimit(FieldLimitsCPUMillis, uint64(par.GetCpuMillis()), uint64(c.GetCpuMillis()))
	if err != nil {
		return nil, err
	}
	if out.OutputBytes, err = narrowLimit(FieldLimitsOutputBytes, par.GetOutputBytes(), c.GetOutputBytes()); err != nil {
		return nil, err
	}
	if out.LayerBytes, err = narrowLimit("limits.layer_bytes", par.GetLayerBytes(), c.GetLayerBytes()); err != nil {
		return nil, err
	}
	// Both came from uint32 fields, so the conversions back are exact.
	out.Pids, out.CpuMillis = uint32(pids), uint32(cpu)
	return out, nil
}

// narrowLimit narrows one limit where 0 means unlimited (parent) or
// inherit (child).
func narrowLimit(field string, par, c uint64) (uint64, error) {
	switch {
	case c == 0:
		return par, nil
	case par != 0 && c > par:
		return 0, &WidenError{Field: field, Msg: fmt.Sprintf("%d is above the parent's %d", c, par)}
	}
	return c, nil
}

// narrowTimeout is narrowLimit for durations; both are valid and
// non-negative, and nil or zero means unlimited (parent) or inherit (child).
func narrowTimeout(par, c *durationpb.Duration) (*durationpb.Duration, error) {
	if c.GetSeconds() == 0 && c.GetNanos() == 0 {
		return par, nil
	}
	if par != nil && cmp.Or(cmp.Compare(c.GetSeconds(), par.GetSeconds()), cmp.Compare(c.GetNanos(), par.GetNanos())) > 0 {
		return nil, &WidenError{Field: FieldLimitsTimeout, Msg: fmt.Sprintf("%v is above the parent's %v", c.AsDuration(), par.AsDuration())}
	}
	return c, nil
}
