package launcherlinux

import (
	"encoding/json"
	"errors"
	"runtime"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeHost is a host with seccomp user notification where only the listed
// paths exist.
func fakeHost(abi int, dirs, files []string) Host {
	return Host{LandlockABI: abi, Notify: true, Exists: func(p string) (bool, bool) {
		for _, d := range dirs {
			if d == p {
				return true, true
			}
		}
		for _, f := range files {
			if f == p {
				return true, false
			}
		}
		return false, false
	}}
}

func TestPlanGolden(t *testing.T) {
	const mainSocket = "/run/sandboxd/sandboxd.sock"
	cases := []struct {
		name string
		pol  *sandboxdv1.Policy
		host Host
		tty  bool
		// session is the session socket; hide replaces the main socket
		// as what to hide.
		session string
		hide    []string
	}{
		{"default", nil, fakeHost(7, nil, nil), false, "", nil},
		{"workspace-write", &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{"/work", "/tmp/cache"},
				ReadOnly: []string{"/work/.git", "/work/a/b/.agent"},
				Deny:     []string{"/home/u/.ssh", "/home/u/.netrc", "/work/.env", "/nonexistent"},
			},
			Limits: &sandboxdv1.Limits{Timeout: durationpb.New(30e9)},
		}, fakeHost(7, []string{"/work", "/work/.git", "/home/u/.ssh", "/tmp/cache"}, []string{"/home/u/.netrc", mainSocket}), true, "", nil},
		{"network-host-no-landlock", &sandboxdv1.Policy{
			Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
		}, fakeHost(0, nil, nil), false, "", nil},
		{"landlock-set", &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write: []string{"/work"},
				Deny:  []string{"/home/u/.ssh"},
			},
		}, func() Host { h := fakeHost(7, []string{"/work", "/home/u/.ssh"}, nil); h.Set = SetLandlock; return h }(), true, "", nil},
		{"full-access", &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{Write: []string{"/"}},
			Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
		}, fakeHost(4, []string{"/"}, []string{mainSocket}), false, "", nil},
		// The sessions' directory beside the main socket: both masked.
		{"network-host-session-socket", &sandboxdv1.Policy{
			Network:  &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
			Children: &sandboxdv1.Children{Allow: true},
		}, fakeHost(7, []string{"/run/sandboxd/sessions"}, []string{mainSocket}), false,
			"/run/sandboxd/sessions/s1.sock", []string{mainSocket, "/run/sandboxd/sessions"}},
		// A directory holding the main socket too: its mask covers both.
		{"network-none-session-socket", &sandboxdv1.Policy{
			Children: &sandboxdv1.Children{Allow: true},
		}, fakeHost(7, []string{"/run/sandboxd"}, []string{mainSocket}), true,
			"/run/sandboxd/s1.sock", []string{mainSocket, "/run/sandboxd"}},
		// The filter refuses by itself, and nothing is recorded.
		{"no-user-notification", &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{Write: []string{"/work"}},
		}, func() Host {
			h := fakeHost(7, []string{"/work"}, nil)
			h.Notify, h.NotifyMissing = false, "seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER): EBUSY"
			return h
		}(), false, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hide := c.hide
			if hide == nil {
				hide = []string{mainSocket}
			}
			plan, err := BuildPlan(launcher.PlanRequest{
				Policy: policy.Normalize(c.pol), Argv: []string{"sh"}, Env: []string{"PATH=/bin"},
				UID: 1000, GID: 1000, Terminal: c.tty, HideSockets: hide, SessionSocket: c.session,
			}, c.host)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(struct {
				Plan          *Plan
				Report        []*sandboxdv1.FieldEnforcement
				Supervise     *Supervision
				DenialSources []*sandboxdv1.DenialSource
			}{plan, plan.Report, plan.Supervise, plan.DenialSources}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			// The seccomp program holds the architecture's syscall
			// numbers: amd64's plans are the unsuffixed files.
			name := c.name + ".golden.json"
			if runtime.GOARCH != "amd64" {
				name = c.name + "." + runtime.GOARCH + ".golden.json"
			}
			golden.Check(t, name, append(got, '\n'))
		})
	}
}

func TestPlanRefusesWhatItCannotEnforce(t *testing.T) {
	cases := map[string]*sandboxdv1.Policy{
		"filesystem.read": {Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_LISTED}},
		"children.allow":  {Children: &sandboxdv1.Children{Allow: true}},
	}
	for field, pol := range cases {
		_, err := BuildPlan(launcher.PlanRequest{Policy: policy.Normalize(pol), Argv: []string{"sh"}, UID: 1, GID: 1}, fakeHost(7, nil, nil))
		var u *launcher.Unenforceable
		if !errors.As(err, &u) || u.Field != field {
			t.Errorf("%s: got %v, want Unenforceable naming the field", field, err)
		}
	}
}

func TestAncestorsBetween(t *testing.T) {
	got := ancestorsBetween("/w", "/w/a/b/.git")
	if len(got) != 2 || got[0] != "/w/a" || got[1] != "/w/a/b" {
		t.Errorf("got %v", got)
	}
	if got := ancestorsBetween("/w", "/w/.git"); len(got) != 0 {
		t.Errorf("got %v", got)
	}
	if got := ancestorsBetween("/", "/a/.git"); len(got) != 1 || got[0] != "/a" {
		t.Errorf("got %v", got)
	}
}

// The identity files are the daemon's shared ones where it holds them,
// whatever write roots cover them (the sandbox reaches the daemon's file
// only through its read-only mount), and the init's own otherwise.
func TestIdentityFilesSharedWhereTheDaemonHasThem(t *testing.T) {
	const passwd = "sandbox:x:5:5::/:/bin/sh\n"
	for _, c := range []struct {
		write  []string
		shared bool
	}{{nil, true}, {[]string{"/work"}, true}, {[]string{"/etc"}, true}, {nil, false}, {[]string{"/etc"}, false}} {
		host := fakeHost(7, []string{"/work", "/etc"}, nil)
		host.Passwd, host.SharedPasswd = passwd, c.shared
		pol := policy.Normalize(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: c.write}})
		p, err := BuildPlan(launcher.PlanRequest{Policy: pol, Argv: []string{"sh"}, Cwd: "/", UID: 5, GID: 5}, host)
		if err != nil {
			t.Fatal(err)
		}
		var got []MountStep
		for _, s := range p.Mounts {
			if s.Target == "/etc/passwd" {
				got = append(got, s)
			}
		}
		want := MountStep{Kind: MountFile, Target: "/etc/passwd", Content: passwd, Field: "process"}
		if c.shared {
			want = MountStep{Kind: MountFile, Target: "/etc/passwd", Shared: true, Field: "process"}
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("write %q, shared %v: /etc/passwd steps %+v, want %+v", c.write, c.shared, got, want)
		}
	}
}
