package launcherlinux

import (
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
	return capabilities(h, forced, nil, nil)
}

// capabilities is CapabilitiesOf for a daemon whose own state is protect,
// of which open are the directories the sandbox's uid could enter (see
// openToSandbox): planned as a launch plans them, so the report is what
// the landlock set will run.
func capabilities(h *HostProbe, forced MechanismSet, protect, open []string) *sandboxdv1.CapabilitiesReport {
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
	r.Features = launcher.FeatureSupport(func(p *sandboxdv1.Policy) (string, []*sandboxdv1.FieldEnforcement, error) {
		set, err := Choose(p, h, forced)
		if err != nil {
			return "", nil, err
		}
		in := launcher.PlanRequest{Policy: p, Argv: []string{"true"}, UID: 1, GID: 1, Cwd: "/", Protect: protect}
		if p.GetChildren().GetAllow() {
			in.SessionSocket = exampleSessionSocket
		}
		host := h.planHost(set, func(string) (bool, bool) { return true, true })
		if set == SetLandlock {
			host.OpenToSandbox = open
		}
		plan, err := BuildPlan(in, host)
		if err != nil {
			return "", nil, err
		}
		return string(set), plan.Report, nil
	})
	return r
}
