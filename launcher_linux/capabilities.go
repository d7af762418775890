package launcherlinux

import (
	"errors"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

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
	for _, f := range launcher.Features {
		p := policy.Default()
		f.Apply(p)
		p = policy.Normalize(p)
		fs := &sandboxdv1.FeatureSupport{Feature: f.Name}
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
				if e.GetField() == f.Field || (f.Field == "network.allow" && e.GetField() == "network.mode") {
					fs.Enforcement = append(fs.Enforcement, e)
				}
			}
		case errors.As(err, &u):
			fs.Refusal = u.Proto()
		default:
			fs.Refusal = &sandboxdv1.Unenforceable{Field: f.Field, Found: strings.TrimSpace(err.Error())}
		}
		r.Features = append(r.Features, fs)
	}
	return r
}
