package launcher

import (
	"errors"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// Feature is one policy feature a capabilities report answers for, with a
// representative policy that uses it and the field it is about. Every
// backend answers for the same list, so reports compare across OSes.
type Feature struct {
	Name, Field string
	// Apply turns the default policy into one that uses the feature.
	Apply func(p *sandboxdv1.Policy)
}

// Features are what Capabilities reports on, in order.
var Features = []Feature{
	{"filesystem.read=ALL, nothing writable", policy.FieldFilesystemRead, func(p *sandboxdv1.Policy) {}},
	{"filesystem.write", policy.FieldFilesystemWrite, func(p *sandboxdv1.Policy) { p.Filesystem.Write = []string{"/workspace"} }},
	{"filesystem.read_only inside a write root", policy.FieldFilesystemReadOnly, func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/workspace"}
		p.Filesystem.ReadOnly = []string{"/workspace/.git"}
	}},
	{"filesystem.deny outside the write roots", policy.FieldFilesystemDeny, func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/workspace"}
		p.Filesystem.Deny = []string{"/home/user/.ssh"}
	}},
	{"filesystem.deny inside a write root", policy.FieldFilesystemDeny, func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/workspace"}
		p.Filesystem.Deny = []string{"/workspace/.env"}
	}},
	{"filesystem.read=LISTED", policy.FieldFilesystemRead, func(p *sandboxdv1.Policy) {
		p.Filesystem.Read = sandboxdv1.Filesystem_LISTED
		p.Filesystem.ReadRoots = []string{"/usr"}
	}},
	{"network.mode=NONE", policy.FieldNetworkMode, func(p *sandboxdv1.Policy) {}},
	{"network.mode=HOST", policy.FieldNetworkMode, func(p *sandboxdv1.Policy) { p.Network.Mode = sandboxdv1.Network_HOST }},
	{"network.mode=ALLOWLIST", policy.FieldNetworkAllow, func(p *sandboxdv1.Policy) {
		p.Network.Mode = sandboxdv1.Network_ALLOWLIST
		p.Network.Allow = []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}}
	}},
	{"limits.timeout", policy.FieldLimitsTimeout, func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{Timeout: durationpb.New(60e9)} }},
	{"limits.memory_bytes", policy.FieldLimitsMemoryBytes, func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{MemoryBytes: 1 << 30} }},
	{"limits.pids", policy.FieldLimitsPids, func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{Pids: 256} }},
	{"limits.cpu_millis", policy.FieldLimitsCPUMillis, func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{CpuMillis: 1000} }},
	{"limits.output_bytes", policy.FieldLimitsOutputBytes, func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{OutputBytes: 1 << 20} }},
	{"children.allow", policy.FieldChildrenAllow, func(p *sandboxdv1.Policy) { p.Children = &sandboxdv1.Children{Allow: true} }},
	// On Linux under network HOST the sandbox connects to its session
	// socket itself; under NONE the daemon does it for it, which needs more
	// of the host.
	{"children.allow with network.mode=HOST", policy.FieldChildrenAllow, func(p *sandboxdv1.Policy) {
		p.Children = &sandboxdv1.Children{Allow: true}
		p.Network.Mode = sandboxdv1.Network_HOST
	}},
}

// reports says whether a report entry for field speaks of f: an ALLOWLIST
// is reported under network.mode, the field that chose it.
func (f Feature) reports(field string) bool {
	return field == f.Field || f.Field == policy.FieldNetworkAllow && field == policy.FieldNetworkMode
}

// FeaturePlanner is how a backend answers for one feature: given the
// feature's policy (the default policy with the feature applied,
// normalized), the mechanism set and the report that would enforce it on
// this host, or the error that refuses it.
type FeaturePlanner func(p *sandboxdv1.Policy) (set string, report []*sandboxdv1.FieldEnforcement, err error)

// FeatureSupport answers for every entry of Features, in order, through
// plan, so that every backend reports the same way: the report entries of
// the feature's field, or the refusal (an error that is not Unenforceable
// is reported as one for the feature's field).
func FeatureSupport(plan FeaturePlanner) []*sandboxdv1.FeatureSupport {
	out := make([]*sandboxdv1.FeatureSupport, 0, len(Features))
	for _, f := range Features {
		p := policy.Default()
		f.Apply(p)
		p = policy.Normalize(p)
		fs := &sandboxdv1.FeatureSupport{Feature: f.Name}
		set, report, err := plan(p)
		var u *Unenforceable
		switch {
		case err == nil:
			fs.Enforceable, fs.MechanismSet = true, set
			for _, e := range report {
				if f.reports(e.GetField()) {
					fs.Enforcement = append(fs.Enforcement, e)
				}
			}
		case errors.As(err, &u):
			fs.Refusal = u.Proto()
		default:
			fs.Refusal = &sandboxdv1.Unenforceable{Field: f.Field, Found: strings.TrimSpace(err.Error())}
		}
		out = append(out, fs)
	}
	return out
}
