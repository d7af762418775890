//go:build linux

package launcherlinux

import (
	"errors"
	"os"
	"slices"
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
	for _, w := range []string{"/", "/home/u"} {
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
		// Every directory between the write root and the state directory
		// or socket, so neither can be renamed away and remade.
		for _, a := range append(ancestorsBetween(innermostRoot(stateDir, []string{w}), stateDir), sockDir) {
			if !slices.Contains(pins, a) {
				t.Errorf("write %s: %s is not pinned (pins %q)", w, a, pins)
			}
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
}

func TestOpenToSandbox(t *testing.T) {
	dir := t.TempDir()
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	for _, tc := range []struct {
		mode     os.FileMode
		uid, gid uint32
		open     bool
	}{
		{0o700, uid, gid, true},
		{0o700, uid + 1, gid + 1, false},
		{0o750, uid + 1, gid, true},
		{0o701, uid + 1, gid + 1, true},
		{0o070, uid, gid, false},
	} {
		if err := os.Chmod(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		got := openToSandbox([]string{dir, dir + "/missing"}, tc.uid, tc.gid)
		if want := tc.open; (len(got) == 1) != want || len(got) > 1 {
			t.Errorf("mode %o for uid %d gid %d: open %q, want open %v", tc.mode, tc.uid, tc.gid, got, want)
		}
	}
	os.Chmod(dir, 0o700)
}
