package launcherdarwin

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// What the backend tries when it starts.
const (
	// ProbeSandboxExec runs sandbox-exec with a profile that allows
	// everything: the tool is there and may apply a profile at all.
	ProbeSandboxExec = "sandbox-exec"
	// ProbeProfile runs sandbox-exec with profiles this package plans, as
	// the sandbox identity: this macOS accepts every construct they use.
	ProbeProfile = "seatbelt profile"
	// ProbeLog looks for the log tool denials are read with.
	ProbeLog = "unified log"
)

// ProbeResult is the outcome of one probe.
type ProbeResult = launcher.ProbeResult

// Host is what the backend found about this Mac when it started.
type Host struct {
	EUID int
	// Kernel names the OS release, e.g. "macOS 15.5 (Darwin 24.5.0)".
	Kernel string
	Probes []ProbeResult
}

// Get returns the result of a probe; one that was not run did not work.
func (h *Host) Get(name string) ProbeResult { return launcher.FindProbe(h.Probes, name) }

// Refusal is what every Start returns when Seatbelt cannot be applied on
// this host, nil when it can: without it nothing of a policy is enforced.
func (h *Host) Refusal() *launcher.Unenforceable {
	u := &launcher.Unenforceable{Field: "process", Mechanism: "Seatbelt via /usr/bin/sandbox-exec"}
	if r := h.Get(ProbeSandboxExec); !r.OK {
		u.Found = "sandbox-exec does not apply a profile: " + r.Detail
		u.Errno, u.Probe = r.Errno, r.Op
		u.Remedy = "sandbox-exec ships with macOS at /usr/bin/sandbox-exec: restore it if it is missing; run sandboxd outside any sandbox (a sandboxed process cannot apply a profile of its own) and check that no security software blocks it"
		return u
	}
	if r := h.Get(ProbeProfile); !r.OK {
		u.Found = "sandbox-exec refuses the profiles this sandboxd writes: " + r.Detail
		u.Errno, u.Probe = r.Errno, r.Op
		u.Remedy = "this macOS release does not accept a construct of the profile; use a sandboxd release that supports it, and report the probe's output"
		return u
	}
	return nil
}

func (h *Host) facts() *sandboxdv1.HostFacts {
	return &sandboxdv1.HostFacts{Os: "darwin", Kernel: h.Kernel, Euid: uint32(h.EUID), Root: h.EUID == 0, Rootless: h.EUID != 0}
}

func (h *Host) probes() []*sandboxdv1.ProbeResult { return launcher.ProbesProto(h.Probes) }

// exampleSessionSocket stands for the socket the daemon makes for a session
// that may have children; where it lives does not change the plan.
const exampleSessionSocket = "/private/var/run/sandboxd/sessions/session.sock"

// CapabilitiesOf is the report for host h: the facts and probe results,
// whether Seatbelt works, and for each policy feature whether it is
// enforced and how, planned exactly as Start plans it.
func CapabilitiesOf(h *Host) *sandboxdv1.CapabilitiesReport {
	r := &sandboxdv1.CapabilitiesReport{Backend: BackendName, Host: h.facts(), Probes: h.probes()}
	refusal := h.Refusal()
	set := &sandboxdv1.MechanismSet{
		Name:        MechanismSet,
		Description: "a Seatbelt profile, denying by default, applied by /usr/bin/sandbox-exec before the command's first instruction and inherited by every process it starts",
		Available:   refusal == nil,
	}
	if refusal != nil {
		set.Missing = append(set.Missing, refusal.Found+" ("+refusal.Mechanism+")")
	}
	r.MechanismSets = append(r.MechanismSets, set)
	r.Features = launcher.FeatureSupport(func(p *sandboxdv1.Policy) (string, []*sandboxdv1.FieldEnforcement, error) {
		req := launcher.PlanRequest{Policy: p, SessionID: "capabilities"}
		if p.GetChildren().GetAllow() {
			req.SessionSocket = exampleSessionSocket
		}
		plan, err := NewPlan(req, PlanHost{})
		switch {
		case err != nil:
			return "", nil, err
		case refusal != nil:
			return "", nil, refusal
		}
		return MechanismSet, plan.Report, nil
	})
	return r
}
