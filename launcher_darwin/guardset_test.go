package launcherdarwin

import (
	"slices"
	"testing"
)

func TestGuardSet(t *testing.T) {
	g := newGuardSet()
	for _, line := range []string{"+100 5", "+200 0"} {
		if err := g.apply(line); err != nil {
			t.Fatal(err)
		}
	}
	snap := []Proc{
		{Pid: 1, Ppid: 0, Pgid: 1, Start: 1},
		{Pid: 100, Ppid: 50, Pgid: 100, Start: 5},
		{Pid: 101, Ppid: 100, Pgid: 101, Start: 6},
		{Pid: 200, Ppid: 50, Pgid: 200, Start: 7},
		{Pid: 300, Ppid: 1, Pgid: 300, Start: 8},
	}
	if got := pids(g.update(snap)); !slices.Equal(got, []int{100, 101, 200}) {
		t.Errorf("members %v, want [100 101 200]", got)
	}
	// The daemon reaped session 100; its child, which survived, is still
	// the daemon's to kill, no longer the guard's.
	if err := g.apply("-100"); err != nil {
		t.Fatal(err)
	}
	if got := pids(g.update(snap)); !slices.Equal(got, []int{200}) {
		t.Errorf("members after -100: %v, want [200]", got)
	}
	// A leader whose pid was given out again before the guard looked is
	// not the session's.
	if err := g.apply("+400 9"); err != nil {
		t.Fatal(err)
	}
	if got := pids(g.update(append(snap, Proc{Pid: 400, Ppid: 1, Pgid: 400, Start: 99}))); !slices.Equal(got, []int{200}) {
		t.Errorf("a reused pid was adopted: %v", got)
	}
	for _, bad := range []string{"", "+", "+1 0", "+x 0", "+5", "-", "-x", "*5 0", "+5 0 extra"} {
		if err := g.apply(bad); err == nil {
			t.Errorf("apply(%q) accepted a malformed line", bad)
		}
	}
}
