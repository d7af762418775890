package policy

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Merge returns base with extra added to it, the way sandboxctl's flags add
// to a --policy file: lists of extra are appended to those of base; enum
// fields and limits of extra replace those of base when extra sets them
// (non-zero; a non-zero timeout), and extra's children replaces base's when
// present. A network mode of extra other than ALLOWLIST also drops base's
// allow list, which only that mode uses. Neither argument is modified. The result is neither validated nor
// normalized, so Validate reports indexes into the merged lists.
func Merge(base, extra *sandboxdv1.Policy) *sandboxdv1.Policy {
	out := &sandboxdv1.Policy{}
	if base != nil {
		out = base.CloneVT()
	}
	if efs := extra.GetFilesystem(); efs != nil {
		fs := out.GetFilesystem()
		if fs == nil {
			fs = &sandboxdv1.Filesystem{}
			out.Filesystem = fs
		}
		if efs.GetRead() != sandboxdv1.Filesystem_READ_UNSPECIFIED {
			fs.Read = efs.GetRead()
		}
		fs.ReadRoots = slices.Concat(fs.ReadRoots, efs.GetReadRoots())
		fs.Write = slices.Concat(fs.Write, efs.GetWrite())
		fs.ReadOnly = slices.Concat(fs.ReadOnly, efs.GetReadOnly())
		fs.Deny = slices.Concat(fs.Deny, efs.GetDeny())
		fs.Layer = slices.Concat(fs.Layer, efs.GetLayer())
	}
	if en := extra.GetNetwork(); en != nil {
		n := out.GetNetwork()
		if n == nil {
			n = &sandboxdv1.Network{}
			out.Network = n
		}
		if en.GetMode() != sandboxdv1.Network_MODE_UNSPECIFIED {
			if en.GetMode() != sandboxdv1.Network_ALLOWLIST {
				// Allow entries mean something only under ALLOWLIST; kept,
				// they would make "--network none" over an allowlist file
				// an invalid policy instead of the narrower one asked for.
				n.Allow = nil
			}
			n.Mode = en.GetMode()
		}
		for _, a := range en.GetAllow() {
			n.Allow = append(n.Allow, a.CloneVT())
		}
	}
	if el := extra.GetLimits(); el != nil {
		l := out.GetLimits()
		if l == nil {
			l = &sandboxdv1.Limits{}
			out.Limits = l
		}
		if t := el.GetTimeout(); t.GetSeconds() != 0 || t.GetNanos() != 0 {
			l.Timeout = &durationpb.Duration{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
		}
		l.MemoryBytes = cmp.Or(el.GetMemoryBytes(), l.MemoryBytes)
		l.Pids = cmp.Or(el.GetPids(), l.Pids)
		l.CpuMillis = cmp.Or(el.GetCpuMillis(), l.CpuMillis)
		l.OutputBytes = cmp.Or(el.GetOutputBytes(), l.OutputBytes)
		l.LayerBytes = cmp.Or(el.GetLayerBytes(), l.LayerBytes)
	}
	if ec := extra.GetChildren(); ec != nil {
		out.Children = &sandboxdv1.Children{Allow: ec.GetAllow()}
	}
	return out
}
