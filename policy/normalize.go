package policy

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Normalize returns a new policy with the same meaning as p in one canonical
// form, so that policies meaning the same compare equal and digest equal. p
// is not modified and should already be valid (see Validate).
//
// Every submessage is present; READ_UNSPECIFIED becomes ALL and
// MODE_UNSPECIFIED becomes NONE; paths are cleaned, and each path list is
// sorted, deduplicated and stripped of entries that lie within another entry
// of the same list. Entries that cannot have an effect are dropped:
// read_roots unless read is LISTED and those within a write root (which is
// readable anyway), read_only entries outside every write root and layer, network.allow
// unless mode is ALLOWLIST. Hosts are lower-cased and lose a trailing dot
// (IP literals are put in canonical form), sorted by host then port, and an
// entry admitted by another entry is dropped. A zero timeout becomes unset: both mean none.
func Normalize(p *sandboxdv1.Policy) *sandboxdv1.Policy {
	out := Default()
	if p == nil {
		return out
	}
	out.Filesystem = normalizeFilesystem(p.GetFilesystem())
	out.Network = normalizeNetwork(p.GetNetwork())
	l := p.GetLimits()
	out.Limits = &sandboxdv1.Limits{
		MemoryBytes: l.GetMemoryBytes(),
		Pids:        l.GetPids(),
		CpuMillis:   l.GetCpuMillis(),
		OutputBytes: l.GetOutputBytes(),
		LayerBytes:  l.GetLayerBytes(),
	}
	if t := l.GetTimeout(); t != nil && (t.GetSeconds() != 0 || t.GetNanos() != 0) {
		out.Limits.Timeout = &durationpb.Duration{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	out.Children.Allow = p.GetChildren().GetAllow()
	return out
}

func normalizeFilesystem(fs *sandboxdv1.Filesystem) *sandboxdv1.Filesystem {
	out := &sandboxdv1.Filesystem{
		Read:  fs.GetRead(),
		Write: cleanPaths(fs.GetWrite()),
		Deny:  cleanPaths(fs.GetDeny()),
		Layer: cleanPaths(fs.GetLayer()),
	}
	if out.Read == sandboxdv1.Filesystem_READ_UNSPECIFIED {
		out.Read = sandboxdv1.Filesystem_ALL
	}
	if out.Read == sandboxdv1.Filesystem_LISTED {
		out.ReadRoots = slices.DeleteFunc(cleanPaths(fs.GetReadRoots()), func(r string) bool {
			return withinAny(r, out.Write) >= 0
		})
	}
	out.ReadOnly = slices.DeleteFunc(cleanPaths(fs.GetReadOnly()), func(r string) bool {
		return withinAny(r, out.Write) < 0 && withinAny(r, out.Layer) < 0
	})
	return out
}

func normalizeNetwork(n *sandboxdv1.Network) *sandboxdv1.Network {
	out := &sandboxdv1.Network{Mode: n.GetMode()}
	if out.Mode == sandboxdv1.Network_MODE_UNSPECIFIED {
		out.Mode = sandboxdv1.Network_NONE
	}
	if out.Mode != sandboxdv1.Network_ALLOWLIST || len(n.GetAllow()) == 0 {
		return out
	}
	allow := make([]*sandboxdv1.NetworkAllow, 0, len(n.GetAllow()))
	for _, a := range n.GetAllow() {
		allow = append(allow, &sandboxdv1.NetworkAllow{Host: canonicalHost(a.GetHost()), Port: a.GetPort()})
	}
	slices.SortFunc(allow, func(a, b *sandboxdv1.NetworkAllow) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
	})
	allow = slices.CompactFunc(allow, func(a, b *sandboxdv1.NetworkAllow) bool {
		return a.Host == b.Host && a.Port == b.Port
	})
	// Admission is a partial order on distinct entries, so keeping only the
	// entries no other entry admits is the same on every pass.
	out.Allow = slices.DeleteFunc(slices.Clone(allow), func(a *sandboxdv1.NetworkAllow) bool {
		return slices.ContainsFunc(allow, func(b *sandboxdv1.NetworkAllow) bool {
			return b != a && admits(b, a)
		})
	})
	return out
}

// admits reports whether allow entry a admits everything entry b does.
func admits(a, b *sandboxdv1.NetworkAllow) bool {
	return (a.GetPort() == 0 || a.GetPort() == b.GetPort()) && MatchHost(a.GetHost(), b.GetHost())
}
