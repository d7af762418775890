package launcherdarwin

import (
	"slices"
	"testing"
)

// The session leader is pid 100, started at 1000; the daemon is pid 50.
var (
	launchd = Proc{Pid: 1, Ppid: 0, Pgid: 1, Start: 1}
	daemon  = Proc{Pid: 50, Ppid: 1, Pgid: 50, Start: 500}
	leader  = Proc{Pid: 100, Ppid: 50, Pgid: 100, Start: 1000}
	// other is an unrelated process of the host.
	other = Proc{Pid: 300, Ppid: 1, Pgid: 300, Start: 900}
)

func pids(ps []Proc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.Pid)
	}
	return out
}

func TestTracker(t *testing.T) {
	tests := []struct {
		name string
		// snapshots are fed in order; want is the members after each.
		snapshots [][]Proc
		want      [][]int
	}{
		{
			name:      "leader alone",
			snapshots: [][]Proc{{launchd, daemon, leader, other}},
			want:      [][]int{{100}},
		},
		{
			name: "children and grandchildren in one snapshot",
			snapshots: [][]Proc{{
				launchd, daemon, leader, other,
				{Pid: 101, Ppid: 100, Pgid: 100, Start: 1001},
				{Pid: 102, Ppid: 101, Pgid: 102, Start: 1002},
				{Pid: 103, Ppid: 102, Pgid: 102, Start: 1003},
			}},
			want: [][]int{{100, 101, 102, 103}},
		},
		{
			name: "a child calls setsid, then forks",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 100, Start: 1001}},
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}, {Pid: 104, Ppid: 101, Pgid: 101, Start: 1004}},
			},
			want: [][]int{{100, 101}, {100, 101, 104}},
		},
		{
			name: "a daemonized grandchild seen before its parent exited stays a member",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 100, Start: 1001}, {Pid: 102, Ppid: 101, Pgid: 102, Start: 1002}},
				// 101 exited: 102, in a session of its own, now has launchd for parent.
				{launchd, daemon, leader, {Pid: 102, Ppid: 1, Pgid: 102, Start: 1002}},
				// The leader exited too.
				{launchd, daemon, {Pid: 102, Ppid: 1, Pgid: 102, Start: 1002}, other},
			},
			want: [][]int{{100, 101, 102}, {100, 102}, {102}},
		},
		{
			name: "an orphan never seen is still found by the leader's process group",
			snapshots: [][]Proc{
				{launchd, daemon, leader},
				// 101 forked 102 and exited between the snapshots.
				{launchd, daemon, leader, {Pid: 102, Ppid: 1, Pgid: 100, Start: 1002}},
			},
			want: [][]int{{100}, {100, 102}},
		},
		{
			name: "the leader's group outlives the leader",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 100, Start: 1001}},
				// The leader exited; 101, reparented, is still in group 100,
				// and 102 forked by a process that exited meanwhile joins it.
				{launchd, daemon, {Pid: 101, Ppid: 1, Pgid: 100, Start: 1001}, {Pid: 102, Ppid: 1, Pgid: 100, Start: 1002}},
			},
			want: [][]int{{100, 101}, {101, 102}},
		},
		{
			name: "a process joins a member's process group",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}, {Pid: 102, Ppid: 1, Pgid: 102, Start: 1002}},
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}, {Pid: 102, Ppid: 1, Pgid: 101, Start: 1002}},
			},
			want: [][]int{{100, 101}, {100, 101, 102}},
		},
		{
			name: "a reused pid of a gone member is not a member",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}},
				{launchd, daemon, leader},
				// An unrelated process got pid 101, in a group of its own.
				{launchd, daemon, leader, {Pid: 101, Ppid: 1, Pgid: 101, Start: 5000}, {Pid: 105, Ppid: 101, Pgid: 101, Start: 5001}},
			},
			want: [][]int{{100, 101}, {100}, {100}},
		},
		{
			name: "a member whose pid is reused within one interval is dropped for its start time",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}},
				{launchd, daemon, leader, {Pid: 101, Ppid: 300, Pgid: 300, Start: 5000}, other},
			},
			want: [][]int{{100, 101}, {100}},
		},
		{
			name: "a group that emptied is forgotten, so its id given out again is not the session's",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}},
				{launchd, daemon, leader},
				{launchd, daemon, leader, {Pid: 107, Ppid: 1, Pgid: 101, Start: 6000}},
			},
			want: [][]int{{100, 101}, {100}, {100}},
		},
		{
			name: "unrelated processes, the daemon and launchd never are members",
			snapshots: [][]Proc{
				{launchd, daemon, leader, other, {Pid: 301, Ppid: 300, Pgid: 300, Start: 901}, {Pid: 51, Ppid: 50, Pgid: 50, Start: 501}},
			},
			want: [][]int{{100}},
		},
		{
			name: "launchd is never adopted, whatever the snapshot says",
			snapshots: [][]Proc{
				{{Pid: 1, Ppid: 100, Pgid: 100, Start: 1}, {Pid: 0, Ppid: 100, Pgid: 1, Start: 0}, leader},
			},
			want: [][]int{{100}},
		},
		{
			name: "a parentage cycle in a malformed snapshot terminates",
			snapshots: [][]Proc{
				{leader, {Pid: 101, Ppid: 102, Pgid: 100, Start: 1001}, {Pid: 102, Ppid: 101, Pgid: 100, Start: 1002}},
			},
			want: [][]int{{100, 101, 102}},
		},
		{
			name:      "the leader gone before the first snapshot",
			snapshots: [][]Proc{{launchd, daemon, other}},
			want:      [][]int{nil},
		},
		{
			name: "everything gone",
			snapshots: [][]Proc{
				{launchd, daemon, leader, {Pid: 101, Ppid: 100, Pgid: 101, Start: 1001}},
				{launchd, daemon, other},
			},
			want: [][]int{{100, 101}, nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(leader.Pid)
			for i, snap := range tt.snapshots {
				got := pids(tr.Update(snap))
				if !slices.Equal(got, tt.want[i]) {
					t.Errorf("after snapshot %d: members %v, want %v", i, got, tt.want[i])
				}
			}
		})
	}
}

func TestTrackerReportsCurrentState(t *testing.T) {
	tr := NewTracker(leader.Pid)
	tr.Update([]Proc{leader, {Pid: 101, Ppid: 100, Pgid: 100, Start: 1001}})
	got := tr.Update([]Proc{leader, {Pid: 101, Ppid: 1, Pgid: 101, Start: 1001}})
	want := []Proc{leader, {Pid: 101, Ppid: 1, Pgid: 101, Start: 1001}}
	if !slices.Equal(got, want) {
		t.Errorf("members %+v, want %+v", got, want)
	}
}
