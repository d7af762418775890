package launcherwindows

import (
	"strings"
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// provisionedHost is a host where every probe worked.
func provisionedHost() *Host {
	h := &Host{Kernel: "Windows 10.0.26100", System: true, NumCPU: 8,
		OfflineSID: "S-1-5-21-1-2-3-1001", OnlineSID: "S-1-5-21-1-2-3-1002"}
	for _, n := range []string{ProbePrivileges, ProbeStateDir, ProbeUsers, ProbeFirewall,
		ProbeCredentials + " " + OfflineUser, ProbeCredentials + " " + OnlineUser,
		ProbeLogon + " " + OfflineUser, ProbeLogon + " " + OnlineUser} {
		h.Probes = append(h.Probes, ProbeResult{Name: n, OK: true, Op: n})
	}
	return h
}

func (h *Host) withFailed(name string, errno syscall.Errno, detail string) *Host {
	for i := range h.Probes {
		if h.Probes[i].Name == name {
			h.Probes[i].OK, h.Probes[i].Detail = false, detail
			h.Probes[i].Errno = errno
		}
	}
	return h
}

func featureSupport(t *testing.T, r *sandboxdv1.CapabilitiesReport) map[string]*sandboxdv1.FeatureSupport {
	t.Helper()
	if len(r.GetFeatures()) != len(launcher.Features) {
		t.Fatalf("%d features reported, want %d", len(r.GetFeatures()), len(launcher.Features))
	}
	out := map[string]*sandboxdv1.FeatureSupport{}
	for _, f := range r.GetFeatures() {
		out[f.GetFeature()] = f
	}
	return out
}

// refusedFields are the features Windows has no mechanism for.
var refusedFields = map[string]string{
	"filesystem.read=LISTED": "filesystem.read",
	"network.mode=ALLOWLIST": "network.allow",
}

func TestCapabilitiesOfAProvisionedHost(t *testing.T) {
	r := CapabilitiesOf(provisionedHost())
	if r.GetBackend() != BackendName || r.GetHost().GetOs() != "windows" || !r.GetHost().GetRoot() {
		t.Errorf("backend %q, host %v", r.GetBackend(), r.GetHost())
	}
	if sets := r.GetMechanismSets(); len(sets) != 1 || !sets[0].GetAvailable() || sets[0].GetName() != MechanismSet {
		t.Errorf("mechanism sets = %v, want %s available", sets, MechanismSet)
	}
	for name, fs := range featureSupport(t, r) {
		field, refused := refusedFields[name]
		switch {
		case refused && (fs.GetEnforceable() || fs.GetRefusal().GetField() != field):
			t.Errorf("%s: enforceable %v, refusal %v; want refused for %s", name, fs.GetEnforceable(), fs.GetRefusal(), field)
		case !refused && !fs.GetEnforceable():
			t.Errorf("%s: refused: %v", name, fs.GetRefusal())
		case !refused && len(fs.GetEnforcement()) == 0:
			t.Errorf("%s: enforceable but no enforcement reported", name)
		}
	}
}

// TestCapabilitiesWithoutFirewallFilters: only network NONE needs the
// filters; a HOST session is still enforceable.
func TestCapabilitiesWithoutFirewallFilters(t *testing.T) {
	h := provisionedHost().withFailed(ProbeFirewall, 0, "filter ALE_AUTH_CONNECT_V4 is missing")
	fss := featureSupport(t, CapabilitiesOf(h))
	if fs := fss["network.mode=HOST"]; !fs.GetEnforceable() {
		t.Errorf("network HOST refused: %v", fs.GetRefusal())
	}
	fs := fss["network.mode=NONE"]
	if fs.GetEnforceable() || fs.GetRefusal().GetField() != "network.mode" || !strings.Contains(fs.GetRefusal().GetFound(), "ALE_AUTH_CONNECT_V4") {
		t.Errorf("network NONE: enforceable %v, refusal %v; want refused by the missing filter", fs.GetEnforceable(), fs.GetRefusal())
	}
}

func TestCapabilitiesWithoutPrivileges(t *testing.T) {
	h := provisionedHost().withFailed(ProbePrivileges, 1314, "SeAssignPrimaryTokenPrivilege not held")
	r := CapabilitiesOf(h)
	if set := r.GetMechanismSets()[0]; set.GetAvailable() || len(set.GetMissing()) == 0 {
		t.Errorf("mechanism set %v available without the privileges", set)
	}
	for name, fs := range featureSupport(t, r) {
		if fs.GetEnforceable() {
			t.Errorf("%s enforceable without the privileges", name)
		}
		if _, refused := refusedFields[name]; !refused && fs.GetRefusal().GetRemedy() == "" {
			t.Errorf("%s: refusal %v has no remedy", name, fs.GetRefusal())
		}
	}
}

func TestCapabilitiesOfAnUnprovisionedHost(t *testing.T) {
	h := provisionedHost().withFailed(ProbeUsers, 0, "no account sandboxd-offline")
	h.OfflineSID, h.OnlineSID = "", ""
	for name, fs := range featureSupport(t, CapabilitiesOf(h)) {
		if fs.GetEnforceable() {
			t.Errorf("%s enforceable without the sandbox users", name)
		}
	}
}

func TestOnDriveC(t *testing.T) {
	p := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write: []string{"/workspace"}, ReadOnly: []string{"/workspace/.git"}, Deny: []string{"/home/user/.ssh"},
		ReadRoots: []string{`D:\tools`},
	}}
	onDriveC(p)
	fs := p.GetFilesystem()
	got := strings.Join([]string{fs.Write[0], fs.ReadOnly[0], fs.Deny[0], fs.ReadRoots[0]}, " ")
	if want := `C:\workspace C:\workspace\.git C:\home\user\.ssh D:\tools`; got != want {
		t.Errorf("onDriveC: %s, want %s", got, want)
	}
}

// Grants to the shared sandbox users left by an earlier version that the
// daemon could not remove refuse every session: another caller's sandbox
// could read a past write root through them (issue 29 item 2).
func TestStaleGrantsLeftRefuse(t *testing.T) {
	h := provisionedHost()
	if u := h.Refusal(); u != nil {
		t.Fatalf("a provisioned host refuses: %v", u)
	}
	h.Probes = append(h.Probes, ProbeResult{Name: ProbeStaleGrants, Op: "remove", Detail: "access denied"})
	if u := h.Refusal(); u == nil || u.Field != "filesystem.write" || u.Remedy == "" {
		t.Errorf("stale grants left: refusal %v, want one for filesystem.write with a remedy", u)
	}
}
