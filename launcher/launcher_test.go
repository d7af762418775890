package launcher

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestUnenforceable(t *testing.T) {
	u := &Unenforceable{Field: "network.mode", Mechanism: "network namespace", Found: "none", Probe: "unshare(CLONE_NEWNET)", Errno: syscall.EPERM, Remedy: "run as root"}
	want := "cannot enforce network.mode: needs network namespace; found none; unshare(CLONE_NEWNET): " + syscall.EPERM.Error() + "; remedy: run as root"
	if got := u.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	p := u.Proto()
	if p.GetField() != u.Field || p.GetMechanism() != u.Mechanism || p.GetFound() != u.Found || p.GetProbe() != u.Probe || p.GetRemedy() != u.Remedy || !strings.HasPrefix(p.GetErrno(), "EPERM ") {
		t.Errorf("Proto() = %v", p)
	}
	if got := (&Unenforceable{Field: "f", Mechanism: "m"}).Error(); got != "cannot enforce f: needs m" {
		t.Errorf("bare Error() = %q", got)
	}
}

func TestExecErrorExitCode(t *testing.T) {
	for _, c := range []struct {
		err  ExecError
		want int
	}{
		{ExecError{Op: "execve", Errno: syscall.ENOENT}, 127},
		{ExecError{Op: "execve", Errno: syscall.ENOTDIR}, 127},
		{ExecError{Op: "execve", Errno: syscall.EACCES}, 126},
		// A working directory that is missing is not a command not found.
		{ExecError{Op: "chdir", Errno: syscall.ENOENT}, 126},
	} {
		if got := c.err.ExitCode(); got != c.want {
			t.Errorf("%+v: ExitCode() = %d, want %d", c.err, got, c.want)
		}
	}
	e := &ExecError{Op: "execve", Path: "/bin/x", Errno: syscall.ENOENT, Hint: "not in the read roots"}
	if got := e.Error(); !strings.Contains(got, "/bin/x") || !strings.Contains(got, "not in the read roots") {
		t.Errorf("Error() = %q", got)
	}
	if e.Reason = "whole account"; e.Error() != "whole account" {
		t.Errorf("Error() with Reason = %q", e.Error())
	}
}

func TestFindProbe(t *testing.T) {
	rs := []ProbeResult{{Name: "a", OK: true}, {Name: "b", Errno: syscall.EPERM}}
	if r := FindProbe(rs, "b"); r.OK || r.Errno != syscall.EPERM {
		t.Errorf("FindProbe(b) = %+v", r)
	}
	// A probe that was not run did not work.
	if r := FindProbe(rs, "c"); r.OK || r.Name != "c" {
		t.Errorf("FindProbe(c) = %+v", r)
	}
	ps := ProbesProto(rs)
	if len(ps) != 2 || !ps[0].GetOk() || !strings.HasPrefix(ps[1].GetErrno(), "EPERM ") {
		t.Errorf("ProbesProto = %v", ps)
	}
}

func TestNeedsRefusal(t *testing.T) {
	allowlist := &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST}}
	if u := (Needs{}).Refusal(allowlist); u == nil || u.Field != "network.allow" {
		t.Errorf("a backend without the proxy: Refusal(ALLOWLIST) = %v, want a refusal of network.allow", u)
	}
	if u := (Needs{Proxy: true}).Refusal(allowlist); u != nil {
		t.Errorf("a backend with the proxy: Refusal(ALLOWLIST) = %v", u)
	}
	if u := (Needs{}).Refusal(&sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}}); u != nil {
		t.Errorf("Refusal(HOST) = %v", u)
	}
}

type needy struct{ Backend }

func (needy) Needs() Needs { return Needs{Proxy: true} }

func TestNeedsOf(t *testing.T) {
	if !NeedsOf(needy{}).Proxy {
		t.Error("NeedsOf ignores a backend's declaration")
	}
	if NeedsOf(struct{ Backend }{}).Proxy {
		t.Error("a backend that declares nothing needs the proxy")
	}
}

// TestFeatureSupport checks the shared half of every backend's
// capabilities report: one answer per feature, in order, from what the
// planner says of the feature's policy.
func TestFeatureSupport(t *testing.T) {
	refused := &Unenforceable{Field: "limits.pids", Mechanism: "cgroup"}
	var seen []*sandboxdv1.Policy
	got := FeatureSupport(func(p *sandboxdv1.Policy) (string, []*sandboxdv1.FieldEnforcement, error) {
		seen = append(seen, p)
		switch {
		case p.GetLimits().GetPids() != 0:
			return "", nil, refused
		case p.GetLimits().GetCpuMillis() != 0:
			return "", nil, errors.New(" no cpu controller \n")
		}
		return "set", []*sandboxdv1.FieldEnforcement{
			{Field: "filesystem.read", Mechanism: "r"},
			{Field: "network.mode", Mechanism: "n"},
			{Field: "filesystem.write", Mechanism: "w"},
		}, nil
	})
	if len(got) != len(Features) || len(seen) != len(Features) {
		t.Fatalf("%d answers and %d plans for %d features", len(got), len(seen), len(Features))
	}
	for i, f := range Features {
		fs := got[i]
		if fs.GetFeature() != f.Name {
			t.Fatalf("answer %d is for %q, want %q", i, fs.GetFeature(), f.Name)
		}
		switch f.Name {
		case "limits.pids":
			if fs.GetEnforceable() || fs.GetRefusal().GetField() != "limits.pids" || fs.GetRefusal().GetMechanism() != "cgroup" {
				t.Errorf("%s: %v, want the planner's refusal", f.Name, fs)
			}
		case "limits.cpu_millis":
			if fs.GetEnforceable() || fs.GetRefusal().GetField() != f.Field || fs.GetRefusal().GetFound() != "no cpu controller" {
				t.Errorf("%s: %v, want a refusal of the feature's field saying the error", f.Name, fs)
			}
		default:
			if !fs.GetEnforceable() || fs.GetMechanismSet() != "set" {
				t.Errorf("%s: %v, want enforceable by set", f.Name, fs)
			}
			for _, e := range fs.GetEnforcement() {
				if e.GetField() != f.Field && !(f.Field == "network.allow" && e.GetField() == "network.mode") {
					t.Errorf("%s: reports %s", f.Name, e.GetField())
				}
			}
		}
	}
	// The planner gets normalized policies: a feature's own settings on
	// top of the default, never the default alone for all of them.
	if seen[0].GetFilesystem() == nil || seen[1].GetFilesystem().GetWrite()[0] != "/workspace" {
		t.Errorf("planned policies: %v, %v", seen[0], seen[1])
	}
}

func TestSpecPlanRequest(t *testing.T) {
	p := &sandboxdv1.Policy{}
	spec := Spec{
		SessionID: "s", Policy: p, Argv: []string{"sh"}, Env: []string{"A=1"}, Cwd: "/w", UID: 7, GID: 8,
		Stdio: Stdio{Terminal: true, Rows: 24, Cols: 80}, HideSockets: []string{"/run/d.sock"}, SessionSocket: "/run/s.sock",
		RootCaller: true, CallerGroups: []uint32{9}, Proxy: func(net.Listener) {},
		ParentSessionID: "parent", ParentMechanismSet: "namespaces", Layers: map[string]*os.File{"/b": nil, "/a": nil, "/c": nil},
	}
	r := spec.PlanRequest()
	if r.Policy != p || r.SessionID != "s" || r.Argv[0] != "sh" || r.Env[0] != "A=1" || r.Cwd != "/w" || r.UID != 7 || r.GID != 8 ||
		!r.Terminal || r.Rows != 24 || r.Cols != 80 || r.HideSockets[0] != "/run/d.sock" || r.SessionSocket != "/run/s.sock" || !r.Child ||
		r.ParentMechanismSet != "namespaces" || !r.RootCaller || r.CallerGroups[0] != 9 || !r.Proxy {
		t.Errorf("PlanRequest() = %+v", r)
	}
	// Sorted, so that a plan does not depend on the order of a map.
	if got := strings.Join(r.Layered, " "); got != "/a /b /c" {
		t.Errorf("Layered = %q, want /a /b /c", got)
	}
	if r := (Spec{}).PlanRequest(); r.Child || r.Proxy {
		t.Errorf("a root session without a proxy asks for %+v", r)
	}
}
