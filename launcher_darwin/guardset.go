package launcherdarwin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// guardSet is what the daemon's guard follows: the sessions the daemon
// announced on the lifeline, one Tracker each. The daemon writes
// "+PID START" when a session's leader has started (START its start time
// from the process table, 0 when unknown) and "-PID" once it has reaped the
// session.
type guardSet struct {
	sessions map[int]*Tracker
}

func newGuardSet() *guardSet { return &guardSet{sessions: map[int]*Tracker{}} }

// apply reads one line of the lifeline.
func (g *guardSet) apply(line string) error {
	op, rest := line[:min(1, len(line))], line[min(1, len(line)):]
	fields := strings.Fields(rest)
	switch {
	case op == "+" && len(fields) == 2:
		pid, err1 := strconv.Atoi(fields[0])
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || pid <= 1 {
			break
		}
		t := NewTracker(pid)
		// Known from the daemon's snapshot: a pid the kernel gave out again
		// before the guard first looked is not the leader.
		t.members[pid] = Proc{Pid: pid, Start: start}
		g.sessions[pid] = t
		return nil
	case op == "-" && len(fields) == 1:
		pid, err := strconv.Atoi(fields[0])
		if err != nil {
			break
		}
		delete(g.sessions, pid)
		return nil
	}
	return fmt.Errorf("lifeline: unreadable line %q", line)
}

// update follows every session into snapshot and returns all their live
// members, ordered by pid.
func (g *guardSet) update(snapshot []Proc) []Proc {
	var all []Proc
	for _, t := range g.sessions {
		all = append(all, t.Update(snapshot)...)
	}
	slices.SortFunc(all, func(a, b Proc) int { return a.Pid - b.Pid })
	return slices.CompactFunc(all, func(a, b Proc) bool { return a.Pid == b.Pid })
}
