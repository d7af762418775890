package launcherlinux

import (
	"errors"
	"slices"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// A rootless daemon's state directory under the home a policy grants.
const (
	stateDir = "/home/u/.local/state/sandboxd"
	sockDir  = "/home/u/run"
	sock     = sockDir + "/sandboxd.sock"
)

func daemonStateRequest(write ...string) launcher.PlanRequest {
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: write}}
	return launcher.PlanRequest{Policy: policy.Normalize(pol), Argv: []string{"sh"}, UID: 1000, GID: 1000, Protect: []string{stateDir}, HideSockets: []string{sock}}
}

func TestDaemonStateIsMaskedUnderAWriteRoot(t *testing.T) {
	// Every directory between the write root and the state directory or
	// socket, so neither can be renamed away and remade.
	wantPins := map[string][]string{
		"/":       {"/home", "/home/u", "/home/u/.local", "/home/u/.local/state", sockDir},
		"/home/u": {"/home/u/.local", "/home/u/.local/state", sockDir},
	}
	for w, want := range wantPins {
		host := fakeHost(7, []string{"/home/u", "/home/u/.local", "/home/u/.local/state", stateDir, sockDir}, []string{sock})
		plan, err := BuildPlan(daemonStateRequest(w), host)
		if err != nil {
			t.Fatalf("write %s: %v", w, err)
		}
		var masked bool
		var pins []string
		for _, s := range plan.Mounts {
			switch {
			case s.Kind == MountTmpfs && s.Target == stateDir:
				masked = s.ReadOnly && s.Mode == 0
			case s.Kind == MountPin:
				pins = append(pins, s.Target)
			}
		}
		if !masked {
			t.Errorf("write %s: the state directory is not masked by an empty read-only tmpfs: %+v", w, plan.Mounts)
		}
		slices.Sort(pins)
		if slices.Sort(want); !slices.Equal(pins, want) {
			t.Errorf("write %s: pins %q, want %q", w, pins, want)
		}
	}
}

func TestWriteRootInsideDaemonStateIsRefused(t *testing.T) {
	for _, set := range []MechanismSet{SetNamespaces, SetLandlock} {
		for _, w := range []string{stateDir, stateDir + "/launcher-journal"} {
			host := fakeHost(7, []string{stateDir, stateDir + "/launcher-journal", sockDir}, nil)
			host.Set = set
			_, err := BuildPlan(daemonStateRequest(w), host)
			var u *launcher.Unenforceable
			if !errors.As(err, &u) || u.Field != "filesystem.write" {
				t.Errorf("%s set, write %s: got %v, want a refusal of filesystem.write", set, w, err)
			}
		}
	}
}

func TestLandlockRefusesAWriteRootHoldingDaemonState(t *testing.T) {
	host := fakeHost(7, []string{"/home/u", stateDir}, nil)
	host.Set = SetLandlock
	_, err := BuildPlan(daemonStateRequest("/home/u"), host)
	var u *launcher.Unenforceable
	if !errors.As(err, &u) || u.Field != "filesystem.write" {
		t.Fatalf("got %v, want a refusal of filesystem.write: landlock cannot take the state directory back out of a write root", err)
	}
}

func TestLandlockKeepsOpenDaemonStateUnreadable(t *testing.T) {
	host := fakeHost(7, []string{"/work", stateDir}, nil)
	host.Set = SetLandlock
	plan, err := BuildPlan(daemonStateRequest("/work"), host)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(plan.Exec.Landlock.ReadExcept, stateDir) {
		t.Errorf("a state directory the sandbox cannot enter by its modes is kept from reads too: %q", plan.Exec.Landlock.ReadExcept)
	}
	host.OpenToSandbox = []string{stateDir}
	if plan, err = BuildPlan(daemonStateRequest("/work"), host); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.Exec.Landlock.ReadExcept, stateDir) {
		t.Errorf("read rules reach the state directory the sandbox's uid owns: read exceptions %q", plan.Exec.Landlock.ReadExcept)
	}
	// The report says what the exception costs: the directories above
	// it can no longer be listed.
	for _, r := range plan.Report {
		if r.Field == "filesystem.read" && !strings.Contains(r.Mechanism, stateDir) {
			t.Errorf("the report does not name the state directory left out of the read rules: %q", r.Mechanism)
		}
	}
}

// A carve-out or deny path beneath the daemon's own paths that is not
// there gets no placeholder: the daemon would make it on the host, in its
// own state (a directory where its journal expects a file, which fails
// every later start), at the word of a policy any child may add to. The
// mask over the state directory keeps the sandbox from it all the same.
func TestNoPlaceholderInDaemonState(t *testing.T) {
	planted := stateDir + "/launcher-journal/entry-0"
	for _, field := range []string{"read_only", "deny"} {
		req := daemonStateRequest("/home/u")
		fs := req.Policy.GetFilesystem()
		if field == "deny" {
			fs.Deny = []string{planted, sockDir + "/sandboxd.sock/x"}
		} else {
			fs.ReadOnly = []string{planted}
		}
		host := fakeHost(7, []string{"/home/u", stateDir, sockDir}, []string{sock})
		plan, err := BuildPlan(req, host)
		if err != nil {
			t.Fatalf("%s: %v", field, err)
		}
		for _, s := range plan.Mounts {
			if within(s.Target, stateDir) && s.Target != stateDir || within(s.Source, stateDir) || within(s.Target, sock) && s.Target != sock {
				t.Errorf("%s beneath the daemon's state: step %+v", field, s)
			}
		}
	}
}

// One of the daemon's own directories gone beneath a write root could be
// made by the sandbox, and then used by the daemon: refused, not run
// without its mask.
func TestMissingDaemonStateUnderAWriteRootIsRefused(t *testing.T) {
	host := fakeHost(7, []string{"/home/u", sockDir}, []string{sock})
	_, err := BuildPlan(daemonStateRequest("/home/u"), host)
	var u *launcher.Unenforceable
	if !errors.As(err, &u) || u.Field != "filesystem.write" {
		t.Fatalf("got %v, want a refusal of filesystem.write", err)
	}
}
