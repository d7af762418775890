package launcherlinux

import (
	"errors"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"google.golang.org/protobuf/types/known/durationpb"
)

// feature is one policy feature the capabilities report answers for, with
// a representative policy that uses it and the field it is about.
type feature struct {
	name, field string
	policy      func(p *sandboxdv1.Policy)
}

var features = []feature{
	{"filesystem.read=ALL, nothing writable", "filesystem.read", func(p *sandboxdv1.Policy) {}},
	{"filesystem.write", "filesystem.write", func(p *sandboxdv1.Policy) { p.Filesystem.Write = []string{"/workspace"} }},
	{"filesystem.read_only inside a write root", "filesystem.read_only", func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/workspace"}
		p.Filesystem.ReadOnly = []string{"/workspace/.git"}
	}},
	{"filesystem.deny outside the write roots", "filesystem.deny", func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/workspace"}
		p.Filesystem.Deny = []string{"/home/user/.ssh"}
	}},
	{"filesystem.deny inside a write root", "filesystem.deny", func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/workspace"}
		p.Filesystem.Deny = []string{"/workspace/.env"}
	}},
	{"filesystem.read=LISTED", "filesystem.read", func(p *sandboxdv1.Policy) {
		p.Filesystem.Read = sandboxdv1.Filesystem_LISTED
		p.Filesystem.ReadRoots = []string{"/usr"}
	}},
	{"network.mode=NONE", "network.mode", func(p *sandboxdv1.Policy) {}},
	{"network.mode=HOST", "network.mode", func(p *sandboxdv1.Policy) { p.Network.Mode = sandboxdv1.Network_HOST }},
	{"network.mode=ALLOWLIST", "network.allow", func(p *sandboxdv1.Policy) {
		p.Network.Mode = sandboxdv1.Network_ALLOWLIST
		p.Network.Allow = []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}}
	}},
	{"limits.timeout", "limits.timeout", func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{Timeout: durationpb.New(60e9)} }},
	{"limits.memory_bytes", "limits.memory_bytes", func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{MemoryBytes: 1 << 30} }},
	{"limits.pids", "limits.pids", func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{Pids: 256} }},
	{"limits.cpu_millis", "limits.cpu_millis", func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{CpuMillis: 1000} }},
	{"limits.output_bytes", "limits.output_bytes", func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{OutputBytes: 1 << 20} }},
	{"children.allow", "children.allow", func(p *sandboxdv1.Policy) { p.Children = &sandboxdv1.Children{Allow: true} }},
	// Under network HOST the sandbox connects to its session socket itself;
	// under NONE the daemon does it for it, which needs more of the host.
	{"children.allow with network.mode=HOST", "children.allow", func(p *sandboxdv1.Policy) {
		p.Children = &sandboxdv1.Children{Allow: true}
		p.Network.Mode = sandboxdv1.Network_HOST
	}},
}

// exampleSessionSocket stands for the socket the daemon makes for a session
// that may have children; where it lives does not change the plan.
const exampleSessionSocket = "/run/sandboxd/sessions/session.sock"

// CapabilitiesOf is the report for host h: the facts and probe results,
// which mechanism sets work at all, and for each policy feature whether it
// is enforced and how, exactly as Start would decide.
func CapabilitiesOf(h *HostProbe, forced MechanismSet) *sandboxdv1.CapabilitiesReport {
	r := &sandboxdv1.CapabilitiesReport{
		Backend: "linux", Host: h.facts(), Probes: h.probes(), ForcedMechanismSet: string(forced),
	}
	base := policy.Default()
	for _, s := range MechanismSets {
		ms := &sandboxdv1.MechanismSet{Name: string(s), Description: s.description(), Available: true}
		if sf := s.check(base, h, false); sf != nil {
			ms.Available = false
			ms.Missing = append(ms.Missing, sf.found+" ("+sf.mechanism+")")
		}
		r.MechanismSets = append(r.MechanismSets, ms)
	}
	for _, f := range features {
		p := policy.Default()
		f.policy(p)
		p = policy.Normalize(p)
		fs := &sandboxdv1.FeatureSupport{Feature: f.name}
		set, err := Choose(p, h, forced)
		var plan *Plan
		if err == nil {
			in := PlanInput{Policy: p, Argv: []string{"true"}, UID: 1, GID: 1, Cwd: "/"}
			if p.GetChildren().GetAllow() {
				in.SessionSocket = exampleSessionSocket
			}
			plan, err = BuildPlan(in, h.planHost(set, func(string) (bool, bool) { return true, true }))
		}
		var u *launcher.Unenforceable
		switch {
		case err == nil:
			fs.Enforceable, fs.MechanismSet = true, string(set)
			for _, e := range plan.Report {
				if e.GetField() == f.field || (f.field == "network.allow" && e.GetField() == "network.mode") {
					fs.Enforcement = append(fs.Enforcement, e)
				}
			}
		case errors.As(err, &u):
			fs.Refusal = u.Proto()
		default:
			fs.Refusal = &sandboxdv1.Unenforceable{Field: f.field, Found: strings.TrimSpace(err.Error())}
		}
		r.Features = append(r.Features, fs)
	}
	return r
}
