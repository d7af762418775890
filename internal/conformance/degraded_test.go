//go:build linux

package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// degradedPolicy is one column of the degraded-host table: a policy and the
// probe steps that show it enforced.
type degradedPolicy struct {
	name  string
	build func(f *fixture) (*sandboxdv1.Policy, []step)
}

func degradedPolicies() []degradedPolicy {
	return []degradedPolicy{
		{"read-only", func(f *fixture) (*sandboxdv1.Policy, []step) {
			w := f.mkdir("w")
			addr, _ := tcpListener(f.t)
			return fsPolicy(nil, nil, nil), []step{deny("write", w+"/f"), allow("read", f.file("r", "x")), deny("tcp-connect", addr)}
		}},
		{"workspace-write, network none", func(f *fixture) (*sandboxdv1.Policy, []step) {
			w := f.mkdir("w")
			cfg := f.file("w/.git/config", "[core]\n")
			other := f.mkdir("other")
			addr, _ := tcpListener(f.t)
			return fsPolicy(list(w), list(w+"/.git"), nil),
				[]step{allow("write", w+"/f"), deny("write", cfg), deny("write", other+"/f"), deny("tcp-connect", addr)}
		}},
		{"workspace-write, network host", func(f *fixture) (*sandboxdv1.Policy, []step) {
			w := f.mkdir("w")
			cfg := f.file("w/.git/config", "[core]\n")
			addr, _ := tcpListener(f.t)
			p := fsPolicy(list(w), list(w+"/.git"), nil)
			p.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
			return p, []step{allow("write", w+"/f"), deny("write", cfg), allow("tcp-connect", addr)}
		}},
		{"write allowlist + deny, network none", func(f *fixture) (*sandboxdv1.Policy, []step) {
			w := f.mkdir("w")
			secret := f.file("home/.ssh/id", "key\n")
			other := f.mkdir("other")
			addr, _ := tcpListener(f.t)
			sock := f.path("host.sock")
			unixListener(f.t, sock)
			return fsPolicy(list(w), nil, list(f.path("home/.ssh"))),
				[]step{allow("write", w+"/f"), deny("read", secret), deny("write", other+"/f"), deny("tcp-connect", addr), deny("unix-connect", sock)}
		}},
		{"write allowlist, network host", func(f *fixture) (*sandboxdv1.Policy, []step) {
			w := f.mkdir("w")
			other := f.mkdir("other")
			addr, _ := tcpListener(f.t)
			p := fsPolicy(list(w), nil, nil)
			p.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
			return p, []step{allow("write", w+"/f"), deny("write", other+"/f"), allow("tcp-connect", addr)}
		}},
		{"deny paths inside and outside the write root", func(f *fixture) (*sandboxdv1.Policy, []step) {
			w := f.mkdir("w")
			env := f.file("w/.env", "TOKEN=x\n")
			secret := f.file("home/.netrc", "machine x\n")
			p := fsPolicy(list(w), nil, list(env, secret))
			p.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
			return p, []step{allow("write", w+"/f"), deny("read", env), deny("write", env), deny("read", secret)}
		}},
	}
}

// degradedHost is one row: how the daemon is started and what each policy
// must come to there: a mechanism set, or "refused: <field>".
type degradedHost struct {
	name string
	wrap func() []string
	want map[string]string
}

const (
	ns = "namespaces"
	ll = "landlock"
)

func refusedFor(field string) string { return "refused: " + field }

// withoutNamespaces is what a host that cannot build the namespaces set
// but has Landlock and seccomp gives each policy.
var withoutNamespaces = map[string]string{
	"read-only":                                    ll,
	"workspace-write, network none":                refusedFor("filesystem.read_only"),
	"workspace-write, network host":                refusedFor("filesystem.read_only"),
	"write allowlist + deny, network none":         ll,
	"write allowlist, network host":                ll,
	"deny paths inside and outside the write root": refusedFor("filesystem.deny"),
}

func all(v string) map[string]string {
	m := map[string]string{}
	for _, p := range degradedPolicies() {
		m[p.name] = v
	}
	return m
}

func hostsimWrap(deny string) func() []string {
	return func() []string { return []string{linuxHost.hostsim, "--deny", deny, "--"} }
}

func degradedHosts() []degradedHost {
	hosts := []degradedHost{
		{"healthy host", func() []string { return nil }, all(ns)},
		{"user namespaces denied (clone/unshare CLONE_NEWUSER: EPERM)", hostsimWrap("userns"), withoutNamespaces},
		{"every namespace denied (clone/unshare CLONE_NEW*, setns: EPERM)", hostsimWrap("namespaces"), withoutNamespaces},
		{"mounts denied (mount, open_tree, fsopen...: EPERM)", hostsimWrap("mount"), withoutNamespaces},
		{"loopback of a new netns cannot be brought up (SIOCSIFFLAGS: EPERM)", hostsimWrap("loopback"), map[string]string{
			"read-only":                                    ll,
			"workspace-write, network none":                refusedFor("network.mode"),
			"workspace-write, network host":                ns,
			"write allowlist + deny, network none":         ll,
			"write allowlist, network host":                ns,
			"deny paths inside and outside the write root": ns,
		}},
		{"no Landlock (landlock_*: EPERM)", hostsimWrap("landlock"), all(ns)},
		{"no seccomp (seccomp, prctl(PR_SET_SECCOMP): EPERM)", hostsimWrap("seccomp"), map[string]string{
			"read-only":                                    refusedFor("network.mode"),
			"workspace-write, network none":                refusedFor("network.mode"),
			"workspace-write, network host":                ns,
			"write allowlist + deny, network none":         refusedFor("network.mode"),
			"write allowlist, network host":                ns,
			"deny paths inside and outside the write root": ns,
		}},
		{"no user namespaces and no Landlock", hostsimWrap("userns,landlock"), map[string]string{
			"read-only":                                    refusedFor("filesystem.read"),
			"workspace-write, network none":                refusedFor("filesystem.write"),
			"workspace-write, network host":                refusedFor("filesystem.write"),
			"write allowlist + deny, network none":         refusedFor("filesystem.write"),
			"write allowlist, network host":                refusedFor("filesystem.write"),
			"deny paths inside and outside the write root": refusedFor("filesystem.write"),
		}},
	}
	if suite.asRoot {
		// Root of a user namespace that maps only itself, as in a
		// container without a subuid range: the sandbox uid cannot be
		// mapped into a new user namespace nor switched to.
		hosts = append(hosts, degradedHost{"uid_map of the sandbox uid denied (root of a user namespace mapping only uid 0)",
			func() []string { return []string{"unshare", "--user", "--map-root-user", "--"} }, map[string]string{
				"read-only":                                    refusedFor("filesystem.read"),
				"workspace-write, network none":                refusedFor("filesystem.write"),
				"workspace-write, network host":                refusedFor("filesystem.write"),
				"write allowlist + deny, network none":         refusedFor("filesystem.write"),
				"write allowlist, network host":                refusedFor("filesystem.write"),
				"deny paths inside and outside the write root": refusedFor("filesystem.write"),
			}})
	} else {
		// bubblewrap's --disable-userns: what an unprivileged daemon
		// inside a container that forbids nested user namespaces sees.
		hosts = append(hosts, degradedHost{"rootless in bubblewrap --unshare-user --disable-userns",
			func() []string {
				return []string{"bwrap", "--unshare-user", "--disable-userns", "--die-with-parent", "--dev-bind", "/", "/", "--"}
			}, withoutNamespaces})
	}
	return hosts
}

// TestDegradedHosts starts a daemon on each simulated degraded host and runs
// every policy of the table there: each must be enforced by the expected
// mechanism set, with the probe denied what the policy denies, or refused
// with a structured reason naming the expected field. Nothing may run
// unconfined. Set SANDBOXD_DEGRADED_TABLE to a file to get the table.
func TestDegradedHosts(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "| host (daemon as %s) | %s |\n", map[bool]string{true: "root", false: "uid " + fmt.Sprint(os.Getuid())}[suite.asRoot], strings.Join(policyNames(), " | "))
	fmt.Fprintf(&table, "|---|%s\n", strings.Repeat("---|", len(degradedPolicies())))
	for _, h := range degradedHosts() {
		t.Run(h.name, func(t *testing.T) {
			wrap := h.wrap()
			if _, err := exec.LookPath(wrap0(wrap)); err != nil {
				t.Fatalf("%s is needed to simulate this host: %v (make deps installs it)", wrap0(wrap), err)
			}
			dir, err := os.MkdirTemp(suite.root, "deg-")
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(dir, 0o755)
			var args []string
			if suite.asRoot {
				args = []string{"--sandbox-uid", fmt.Sprint(sandboxUID), "--sandbox-gid", fmt.Sprint(sandboxUID)}
			}
			d, err := startDaemonWith(dir, wrap, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer d.stop()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, d.socket)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			row := []string{h.name}
			for _, p := range degradedPolicies() {
				// Both paths go through the same launch; the cell must
				// not depend on which.
				cell, got := runDegraded(t, c, p, h.want[p.name], false)
				if _, pty := runDegraded(t, c, p, h.want[p.name], true); pty != got {
					t.Errorf("%s: exec and pty paths differ: exec %s, pty %s", p.name, got, pty)
				}
				row = append(row, cell)
			}
			fmt.Fprintf(&table, "| %s |\n", strings.Join(row, " | "))
		})
	}
	t.Logf("degraded-host table:\n%s", table.String())
	if out := os.Getenv("SANDBOXD_DEGRADED_TABLE"); out != "" {
		if err := os.WriteFile(out, []byte(table.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func wrap0(wrap []string) string {
	if len(wrap) == 0 {
		return suite.sandboxd
	}
	return wrap[0]
}

func policyNames() []string {
	var out []string
	for _, p := range degradedPolicies() {
		out = append(out, p.name)
	}
	return out
}

// runDegraded runs one cell and returns its text for the table and its
// outcome: the set and each step's result, or the refused field.
func runDegraded(t *testing.T, c *client.Client, p degradedPolicy, want string, tty bool) (string, string) {
	t.Helper()
	f := newFixture(t)
	pol, steps := p.build(f)
	marker := f.path("ran")
	var args []string
	for _, s := range steps {
		args = append(args, s.args...)
	}
	args = append(args, "write", marker)
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	var stdout, stderr strings.Builder
	res, err := c.Run(ctx, client.RunOptions{Start: probeStart(tty, pol, nil, args...), Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		u := client.UnenforceableFrom(err)
		if u == nil {
			t.Errorf("%s: failed without a structured refusal: %v", p.name, err)
			return "error: " + err.Error(), "error"
		}
		absent(t, marker)
		got := refusedFor(u.GetField())
		if got != want {
			t.Errorf("%s: %s (needs %s; found %s; remedy %s), want %s", p.name, got, u.GetMechanism(), u.GetFound(), u.GetRemedy(), want)
		}
		if u.GetRemedy() == "" || u.GetMechanism() == "" {
			t.Errorf("%s: refusal without mechanism or remedy: %v", p.name, u)
		}
		return fmt.Sprintf("refused: **%s**: needs %s; found %s; remedy: %s", u.GetField(), u.GetMechanism(), u.GetFound(), u.GetRemedy()), got
	}
	set := res.Enforcement.GetMechanismSet()
	if set != want {
		t.Errorf("%s: ran on %q, want %s", p.name, set, want)
	}
	outcomes := parseOutcomes(stdout.String())
	if len(outcomes) != len(steps)+1 {
		t.Fatalf("%s: probe reported %d steps, want %d\n%s%s", p.name, len(outcomes), len(steps)+1, stdout.String(), stderr.String())
	}
	got := set
	for i, s := range steps {
		o := outcomes[i]
		got += fmt.Sprintf(" %v", o.OK)
		switch {
		case s.want == allowed && !o.OK:
			t.Errorf("%s (%s): %s must be allowed, got %s", p.name, set, strings.Join(s.args, " "), o)
		case s.want == denied && o.OK:
			t.Errorf("%s (%s): %s must be denied, got %s", p.name, set, strings.Join(s.args, " "), o)
		}
	}
	var mechs []string
	for _, e := range res.Enforcement.GetFields() {
		if e.GetField() == "network.mode" || e.GetField() == "filesystem.deny" && len(pol.GetFilesystem().GetDeny()) > 0 || e.GetField() == "filesystem.read_only" && len(pol.GetFilesystem().GetReadOnly()) > 0 {
			mechs = append(mechs, e.GetField()+": "+e.GetMechanism())
		}
	}
	return fmt.Sprintf("enforced by **%s** (%s)", set, strings.Join(mechs, "; ")), got
}
