package launcherlinux

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

var allPrims = []string{PrimUserNS, PrimIDMap, PrimMountNS, PrimPIDNS, PrimIPCNS, PrimUTSNS, PrimCgroupNS, PrimNetNS, PrimLoopback, PrimMounts, PrimLandlock, PrimSeccomp, PrimSeccompNotify, PrimSwitchID, PrimCgroupMemory, PrimCgroupPids, PrimCgroupCPU}

// probed is a host where every primitive works but the failing ones, which
// fail with EPERM.
func probed(euid, abi int, failing ...string) *HostProbe {
	h := &HostProbe{EUID: euid, LandlockABI: abi}
	for _, p := range allPrims {
		r := ProbeResult{Name: p, OK: true, Op: "try " + p}
		for _, f := range failing {
			if f == p {
				r.OK, r.Errno = false, syscall.EPERM
			}
		}
		h.Results = append(h.Results, r)
	}
	return h
}

func pol(mutate func(p *sandboxdv1.Policy)) *sandboxdv1.Policy {
	p := policy.Default()
	mutate(p)
	return policy.Normalize(p)
}

func TestChoose(t *testing.T) {
	readOnly := pol(func(p *sandboxdv1.Policy) {})
	carveOut := pol(func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/w"}
		p.Filesystem.ReadOnly = []string{"/w/.git"}
	})
	hostNet := pol(func(p *sandboxdv1.Policy) {
		p.Filesystem.Write = []string{"/w"}
		p.Network.Mode = sandboxdv1.Network_HOST
	})
	children := pol(func(p *sandboxdv1.Policy) { p.Children.Allow = true })
	hostNetChildren := pol(func(p *sandboxdv1.Policy) {
		p.Network.Mode = sandboxdv1.Network_HOST
		p.Children.Allow = true
	})
	for _, c := range []struct {
		name   string
		p      *sandboxdv1.Policy
		h      *HostProbe
		forced MechanismSet
		want   string // a set, or "refused <field>"
	}{
		{"healthy", carveOut, probed(0, 7), "", "namespaces"},
		{"forced landlock", readOnly, probed(0, 7), SetLandlock, "landlock"},
		{"forced landlock, carve-out", carveOut, probed(0, 7), SetLandlock, "refused filesystem.read_only"},
		{"no userns", readOnly, probed(1000, 7, PrimUserNS), "", "landlock"},
		{"no userns, carve-out", carveOut, probed(1000, 7, PrimUserNS), "", "refused filesystem.read_only"},
		{"no userns, old landlock", readOnly, probed(1000, 5, PrimUserNS), "", "refused filesystem.read"},
		{"no loopback, network none", readOnly, probed(0, 7, PrimLoopback), "", "landlock"},
		{"no loopback, network host", hostNet, probed(0, 7, PrimLoopback), "", "namespaces"},
		{"no seccomp, network none", readOnly, probed(0, 7, PrimSeccomp), "", "refused network.mode"},
		{"no seccomp, network host", hostNet, probed(0, 7, PrimSeccomp), "", "namespaces"},
		{"no landlock", carveOut, probed(0, 0, PrimLandlock), "", "namespaces"},
		{"root cannot switch, no map", readOnly, probed(0, 7, PrimIDMap, PrimSwitchID), "", "refused filesystem.read"},
		{"root cannot switch, carve-out: the host is named, not the policy", carveOut, probed(0, 7, PrimIDMap, PrimSwitchID), "", "refused filesystem.write"},
		{"children", children, probed(0, 7), "", "namespaces"},
		{"children, forced landlock", children, probed(0, 7), SetLandlock, "refused children.allow"},
		{"children, no userns", children, probed(1000, 7, PrimUserNS), "", "refused children.allow"},
		{"children, network none, no user notification", children, probed(0, 7, PrimSeccompNotify), "", "refused children.allow"},
		{"children, network host, no user notification", hostNetChildren, probed(0, 7, PrimSeccompNotify), "", "namespaces"},
		{"no user notification, no children", readOnly, probed(0, 7, PrimSeccompNotify), "", "namespaces"},
		{"listed reads", pol(func(p *sandboxdv1.Policy) {
			p.Filesystem.Read = sandboxdv1.Filesystem_LISTED
			p.Filesystem.ReadRoots = []string{"/usr"}
		}), probed(0, 7), "", "refused filesystem.read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := Choose(c.p, c.h, c.forced)
			got := string(set)
			var u *launcher.Unenforceable
			if errors.As(err, &u) {
				got = "refused " + u.Field
				if u.Remedy == "" || u.Mechanism == "" || u.Found == "" {
					t.Errorf("refusal lacks mechanism, found or remedy: %+v", u)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Choose = %s (%v), want %s", got, err, c.want)
			}
		})
	}
}

// The refusal names the probe that failed, with its errno, and a remedy for
// each set.
func TestRefusalCarriesProbeAndRemedies(t *testing.T) {
	_, err := Choose(pol(func(p *sandboxdv1.Policy) {}), probed(1000, 0, PrimUserNS, PrimLandlock), "")
	var u *launcher.Unenforceable
	if !errors.As(err, &u) {
		t.Fatalf("Choose = %v, want a refusal", err)
	}
	if u.Errno != syscall.EPERM || u.Probe != "try "+PrimUserNS {
		t.Errorf("probe %q errno %v, want the user namespace probe with EPERM", u.Probe, u.Errno)
	}
	for _, want := range []string{"unprivileged_userns_clone", "CONFIG_SECURITY_LANDLOCK"} {
		if !strings.Contains(u.Remedy, want) {
			t.Errorf("remedy %q does not mention %s", u.Remedy, want)
		}
	}
}

func TestCapabilitiesAgreeWithChoose(t *testing.T) {
	r := CapabilitiesOf(probed(1000, 7, PrimUserNS), "")
	sets := map[string]bool{}
	for _, s := range r.GetMechanismSets() {
		sets[s.GetName()] = s.GetAvailable()
	}
	if sets["namespaces"] || !sets["landlock"] {
		t.Errorf("sets = %v, want only landlock available", sets)
	}
	got := map[string]string{}
	for _, f := range r.GetFeatures() {
		if f.GetEnforceable() {
			got[f.GetFeature()] = f.GetMechanismSet()
			if len(f.GetEnforcement()) == 0 {
				t.Errorf("%s: enforceable without saying how", f.GetFeature())
			}
		} else {
			got[f.GetFeature()] = "refused " + f.GetRefusal().GetField()
		}
	}
	want := map[string]string{
		"filesystem.write":                         "landlock",
		"filesystem.read_only inside a write root": "refused filesystem.read_only",
		"filesystem.deny inside a write root":      "refused filesystem.deny",
		"filesystem.deny outside the write roots":  "landlock",
		"network.mode=NONE":                        "landlock",
		"network.mode=ALLOWLIST":                   "refused network.mode",
		"limits.timeout":                           "landlock",
		"limits.memory_bytes":                      "landlock",
		"limits.pids":                              "landlock",
		"limits.cpu_millis":                        "landlock",
		"limits.output_bytes":                      "landlock",
		"children.allow":                           "refused children.allow",
		"children.allow with network.mode=HOST":    "refused children.allow",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
}

// A limit needs its cgroup controller in either set: without it the policy
// is refused for that field, and the other limits are unaffected.
func TestLimitsNeedTheirController(t *testing.T) {
	h := probed(1000, 7, PrimCgroupMemory)
	mem := pol(func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{MemoryBytes: 64 << 20} })
	_, err := Choose(mem, h, "")
	var u *launcher.Unenforceable
	if !errors.As(err, &u) || u.Field != "limits.memory_bytes" || u.Remedy == "" || u.Probe == "" {
		t.Fatalf("memory without its controller: got %v, want a refusal of limits.memory_bytes with probe and remedy", err)
	}
	pids := pol(func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{Pids: 64, CpuMillis: 500} })
	if set, err := Choose(pids, h, ""); err != nil || set != SetNamespaces {
		t.Errorf("pids and cpu: got %v, %v, want the namespaces set", set, err)
	}
}

// A session socket counts whatever the policy says: the daemon made it, so
// the sandbox must get it, and only where the other sockets are hidden.
func TestSessionSocketDecidesLikeChildrenAllow(t *testing.T) {
	p := pol(func(p *sandboxdv1.Policy) {})
	if set, err := choose(p, probed(1000, 7, PrimUserNS), "", true); err == nil {
		t.Errorf("choose with a session socket and no user namespaces = %s, want a refusal", set)
	}
	_, err := BuildPlan(launcher.PlanRequest{Policy: p, Argv: []string{"sh"}, UID: 1, GID: 1, SessionSocket: "/run/s.sock"}, Host{Set: SetLandlock, LandlockABI: 7})
	var u *launcher.Unenforceable
	if !errors.As(err, &u) || u.Field != "children.allow" {
		t.Errorf("landlock plan with a session socket: %v, want a refusal naming children.allow", err)
	}
	plan, err := BuildPlan(launcher.PlanRequest{Policy: p, Argv: []string{"sh"}, UID: 1, GID: 1, SessionSocket: "/run/s.sock"}, fakeHost(7, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Exec.Listener || !plan.Supervise.Connect {
		t.Error("network NONE with a session socket: connects are not handed to the daemon")
	}
}

// The capabilities report says how children are enforced where they are.
func TestCapabilitiesReportChildren(t *testing.T) {
	for _, f := range CapabilitiesOf(probed(0, 7), "").GetFeatures() {
		if !strings.HasPrefix(f.GetFeature(), "children.allow") {
			continue
		}
		if !f.GetEnforceable() || f.GetMechanismSet() != "namespaces" || len(f.GetEnforcement()) != 1 || !strings.Contains(f.GetEnforcement()[0].GetMechanism(), SessionSocketPath) {
			t.Errorf("%s: %v", f.GetFeature(), f)
		}
	}
}

// Capabilities plans with the daemon's state as a launch does: where the
// landlock set leaves a state directory open to the sandbox out of its
// read rules, the features' reports say so.
func TestCapabilitiesPlanWithTheDaemonsState(t *testing.T) {
	r := capabilities(probed(1000, 7, PrimUserNS), "", []string{"/state"}, []string{"/state"})
	var said bool
	for _, f := range r.GetFeatures() {
		for _, e := range f.GetEnforcement() {
			if e.GetField() == "filesystem.read" && strings.Contains(e.GetMechanism(), "/state") {
				said = true
			}
		}
	}
	if !said {
		t.Error("no feature's report names the state directory the landlock set leaves out of its read rules")
	}
}
