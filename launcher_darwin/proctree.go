package launcherdarwin

import (
	"cmp"
	"slices"
)

// Proc is one process of a snapshot of the host's process table.
type Proc struct {
	Pid, Ppid, Pgid int
	// Start is when the process started, in microseconds since the epoch:
	// with the pid it names one process, since pids are reused.
	Start int64
}

// Tracker finds a session's processes without a pid namespace: the
// session leader, everything it forks, and everything that joins one of
// their process groups, followed from snapshot to snapshot.
//
// A process stays a member for as long as it lives once it has been seen
// as one, whatever it does: reparented to launchd when its parent exits,
// or in a new session of its own after setsid, it is still known by its
// pid and start time. What the tracker cannot know is a process that
// both lost its parent and left the session's process groups between two
// snapshots, which is why the backend takes them often.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	members map[int]Proc
	// groups are the process groups known to be the session's: a
	// member's, kept as long as some process is in them. A group id is
	// not given out again while the group has a process, so a group that
	// never emptied between two snapshots is still the same group.
	groups map[int]bool
}

// NewTracker tracks the session whose leader is root. Its start time is
// taken from the first snapshot that has it: the leader is the caller's
// child, so its pid cannot be reused before the caller reaps it.
func NewTracker(root int) *Tracker {
	return &Tracker{members: map[int]Proc{root: {Pid: root}}, groups: map[int]bool{}}
}

// Update follows the session into snapshot and returns its live members,
// ordered by pid.
func (t *Tracker) Update(snapshot []Proc) []Proc {
	byPid := make(map[int]Proc, len(snapshot))
	children := map[int][]Proc{}
	inGroup := map[int][]Proc{}
	for _, p := range snapshot {
		byPid[p.Pid] = p
		children[p.Ppid] = append(children[p.Ppid], p)
		inGroup[p.Pgid] = append(inGroup[p.Pgid], p)
	}

	var queue []Proc
	for pid, m := range t.members {
		p, ok := byPid[pid]
		// Start 0 is the leader not yet seen.
		if !ok || (m.Start != 0 && p.Start != m.Start) {
			delete(t.members, pid)
			continue
		}
		t.members[pid] = p
		queue = append(queue, p)
	}
	for g := range t.groups {
		if len(inGroup[g]) == 0 {
			delete(t.groups, g)
		}
	}
	for g := range t.groups {
		queue = append(queue, inGroup[g]...)
	}

	// Breadth first from what is known: a grandchild forked since the last
	// snapshot is reached through its parent, a process that joined a
	// group through the group.
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p.Pid] || !adoptable(p) {
			continue
		}
		seen[p.Pid] = true
		t.members[p.Pid] = p
		queue = append(queue, children[p.Pid]...)
		if !t.groups[p.Pgid] && adoptableGroup(p.Pgid) {
			t.groups[p.Pgid] = true
			queue = append(queue, inGroup[p.Pgid]...)
		}
	}

	out := make([]Proc, 0, len(t.members))
	for _, m := range t.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Proc) int { return cmp.Compare(a.Pid, b.Pid) })
	return out
}

// adoptable keeps the kernel (pid 0) and launchd (pid 1) out of every
// session: a malformed snapshot must never make them something to kill.
func adoptable(p Proc) bool { return p.Pid > 1 }

func adoptableGroup(pgid int) bool { return pgid > 1 }
