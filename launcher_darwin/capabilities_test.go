package launcherdarwin

import (
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func workingHost() *Host {
	return &Host{EUID: 501, Kernel: "macOS 15.5 (Darwin 24.5.0)", Probes: []ProbeResult{
		{Name: ProbeSandboxExec, OK: true, Op: "/usr/bin/sandbox-exec -p '(version 1)(allow default)' /usr/bin/true"},
		{Name: ProbeProfile, OK: true, Op: "/usr/bin/sandbox-exec -p <planned profile> /usr/bin/true"},
		{Name: ProbeLog, OK: true, Op: "stat /usr/bin/log"},
	}}
}

func featureSupport(r *sandboxdv1.CapabilitiesReport) map[string]*sandboxdv1.FeatureSupport {
	out := map[string]*sandboxdv1.FeatureSupport{}
	for _, f := range r.GetFeatures() {
		out[f.GetFeature()] = f
	}
	return out
}

func TestCapabilities(t *testing.T) {
	r := CapabilitiesOf(workingHost())
	if r.GetBackend() != BackendName || r.GetHost().GetOs() != "darwin" || !r.GetHost().GetRootless() || r.GetHost().GetRoot() {
		t.Errorf("backend %q host %v", r.GetBackend(), r.GetHost())
	}
	if len(r.GetProbes()) != 3 {
		t.Errorf("probes %v", r.GetProbes())
	}
	if sets := r.GetMechanismSets(); len(sets) != 1 || sets[0].GetName() != MechanismSet || !sets[0].GetAvailable() || len(sets[0].GetMissing()) != 0 {
		t.Errorf("mechanism sets %v", sets)
	}
	enforced := []string{
		"filesystem.read=ALL, nothing writable", "filesystem.write", "filesystem.read_only inside a write root",
		"filesystem.deny outside the write roots", "filesystem.deny inside a write root", "filesystem.read=LISTED",
		"network.mode=NONE", "network.mode=HOST", "limits.output_bytes", "children.allow", "children.allow with network.mode=HOST",
	}
	refused := map[string]string{
		"network.mode=ALLOWLIST": "network.allow",
		"limits.memory_bytes":    "limits.memory_bytes",
		"limits.pids":            "limits.pids",
		"limits.cpu_millis":      "limits.cpu_millis",
		"limits.timeout":         "limits.timeout",
	}
	fs := featureSupport(r)
	if len(fs) != len(enforced)+len(refused) {
		t.Errorf("%d features, want %d", len(fs), len(enforced)+len(refused))
	}
	for _, name := range enforced {
		f := fs[name]
		if !f.GetEnforceable() || f.GetMechanismSet() != MechanismSet || f.GetRefusal() != nil {
			t.Errorf("%s: %v, want enforceable by %s", name, f, MechanismSet)
			continue
		}
		if len(f.GetEnforcement()) == 0 {
			t.Errorf("%s: says nothing of how it is enforced", name)
		}
	}
	for name, field := range refused {
		f := fs[name]
		if f.GetEnforceable() || f.GetRefusal().GetField() != field || f.GetRefusal().GetRemedy() == "" {
			t.Errorf("%s: %v, want refused for %s", name, f, field)
		}
	}
}

func TestCapabilitiesWithoutSeatbelt(t *testing.T) {
	h := workingHost()
	h.Probes[0] = ProbeResult{Name: ProbeSandboxExec, Op: "stat /usr/bin/sandbox-exec", Errno: syscall.ENOENT, Detail: "no such file"}
	r := CapabilitiesOf(h)
	if sets := r.GetMechanismSets(); sets[0].GetAvailable() || len(sets[0].GetMissing()) != 1 {
		t.Errorf("mechanism sets %v, want seatbelt missing", sets)
	}
	if p := r.GetProbes()[0]; p.GetOk() || p.GetErrno() == "" {
		t.Errorf("probe %v", p)
	}
	for _, f := range r.GetFeatures() {
		if f.GetEnforceable() {
			t.Errorf("%s: enforceable without Seatbelt", f.GetFeature())
		}
	}
	f := featureSupport(r)["filesystem.write"]
	if u := f.GetRefusal(); u.GetField() != "process" || u.GetMechanism() != "Seatbelt via /usr/bin/sandbox-exec" || u.GetErrno() == "" || u.GetProbe() == "" || u.GetRemedy() == "" {
		t.Errorf("refusal %v", u)
	}
	// What the plan refuses is refused for its own field still.
	if u := featureSupport(r)["limits.pids"].GetRefusal(); u.GetField() != "limits.pids" {
		t.Errorf("limits.pids refused for %q", u.GetField())
	}
}

func TestRefusal(t *testing.T) {
	if u := workingHost().Refusal(); u != nil {
		t.Errorf("a working host refuses: %v", u)
	}
	h := workingHost()
	h.Probes = h.Probes[1:]
	if u := h.Refusal(); u == nil || u.Field != "process" {
		t.Errorf("a host never probed for sandbox-exec: %v", u)
	}
	h = workingHost()
	h.Probes[1] = ProbeResult{Name: ProbeProfile, Op: "/usr/bin/sandbox-exec -p <planned profile> /usr/bin/true", Detail: "exit status 65: sandbox-exec: unbound variable: process-info*"}
	u := h.Refusal()
	if u == nil || u.Probe != h.Probes[1].Op || u.Found == "" {
		t.Errorf("a host that refuses the profile: %v", u)
	}
}
