package launcherdarwin

import (
	"path/filepath"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// FuzzNewPlan plans arbitrary valid policies and decides, from the parsed
// profile alone, what the policy promises: write roots writable outside
// their carve-outs, carve-outs not, deny paths neither readable nor
// writable. However a path is spelled, it must not change the profile's
// shape (it travels as a parameter) nor make the profile depend on rule
// precedence.
func FuzzNewPlan(f *testing.F) {
	f.Add("/Users/dev/project", "/Users/dev/project/.git", "/Users/dev/.ssh", "/opt/tools", true, false, true)
	f.Add("/tmp/w", "/tmp/w/a/b", "/tmp/w/a/c", "/var/x", false, true, false)
	f.Add("/", "/etc", "/private/etc/passwd", "/usr", true, true, true)
	f.Add(`/a") (allow default`, `/a") (allow default/x`, `/b"`, "/c\\d", false, false, false)
	f.Fuzz(func(t *testing.T, write, readOnly, deny, readRoot string, listed, host, children bool) {
		p := &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{Write: []string{write}, ReadOnly: []string{readOnly}, Deny: []string{deny}},
			Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
			Children:   &sandboxdv1.Children{Allow: children},
		}
		if listed {
			p.Filesystem.Read = sandboxdv1.Filesystem_LISTED
			p.Filesystem.ReadRoots = []string{readRoot}
		}
		if host {
			p.Network.Mode = sandboxdv1.Network_HOST
		}
		if policy.Validate(p) != nil {
			return
		}
		p = policy.Normalize(p)
		in := launcher.PlanRequest{Policy: p, SessionID: testSession, HideSockets: []string{"/var/run/sandboxd/sandboxd.sock"}}
		if children {
			in.SessionSocket = "/var/run/sandboxd/sandboxd-sessions/" + testSession + ".sock"
		}
		pl, err := NewPlan(in, PlanHost{})
		if err != nil {
			t.Fatalf("NewPlan refused a policy it can express: %v", err)
		}
		checkStructure(t, in, pl)
		m := newProfileModel(t, pl)
		fs := p.GetFilesystem()
		protected := func(q string) bool {
			for _, r := range append(fs.GetReadOnly(), fs.GetDeny()...) {
				if within(q, filepath.Clean(r)) || within(q, resolvePrivate(filepath.Clean(r))) {
					return true
				}
			}
			return strings.HasPrefix(q, "/dev/") || q == "/dev"
		}
		for _, w := range fs.GetWrite() {
			q := filepath.Join(resolvePrivate(w), "sbd-fuzz-child")
			if !protected(q) && !m.allowed(t, writeQ(q)) {
				t.Errorf("write root %q: %s not writable", w, q)
			}
		}
		for _, r := range fs.GetReadOnly() {
			for _, q := range []string{filepath.Clean(r), resolvePrivate(filepath.Clean(r))} {
				if m.allowed(t, writeQ(q+"/x")) || m.allowed(t, unlinkQ(q)) {
					t.Errorf("read-only %q: %s writable or removable", r, q)
				}
			}
		}
		for _, d := range fs.GetDeny() {
			for _, q := range []string{filepath.Clean(d), resolvePrivate(filepath.Clean(d))} {
				if m.allowed(t, readQ(q)) || m.allowed(t, writeQ(q)) || m.allowed(t, unlinkQ(q)) {
					t.Errorf("deny %q: %s readable, writable or removable", d, q)
				}
			}
		}
	})
}
