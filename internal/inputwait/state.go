package inputwait

import (
	"strconv"
	"time"
)

// State is what a session is doing, as its tasks add up.
type State int

const (
	// Running: a task can run, or every task is blocked on something that
	// ends by no one's doing the daemon can name (a long sleep, a listener
	// without clients, a lock).
	Running State = iota
	// WaitingForInput: every task is blocked, one on the input, and none
	// on anything else that will let it go on.
	WaitingForInput
	// Waiting: every task is blocked, none on the network, and one on
	// something that will let it go on without input: a timer due soon, or
	// a peer that has not yet read what it was sent.
	Waiting
	// WaitingForNetwork: every task is blocked and one on the network.
	WaitingForNetwork
)

// Verdict is what one task's wait, or one file it waits on, means for the
// session's state. Verdicts are ordered: a session's is the greatest of
// its tasks', and a task's the greatest of its files' and its timer's.
type Verdict int

const (
	// Idle: nothing that ends the wait by itself (a pipe from another
	// task of the session, a child, a lock, a long sleep).
	Idle Verdict = iota
	// Input: the session's input.
	Input
	// Progress: a timer due soon, or a peer that has not read a request.
	Progress
	// Network: a connection being set up, or a request sent and not yet
	// answered.
	Network
	// Busy: the task can run.
	Busy
)

// SoonTimer is how far off a timer may be and count as one that lets its
// task go on by itself.
const SoonTimer = time.Second

// TimerConfirm is how long timers due soon must keep being seen before
// they make the session Waiting (see Probe.Check).
const TimerConfirm = 300 * time.Millisecond

// Backoff is how long after the session last waited on the network a
// timer of an event loop or a sleep due within as long counts as one that
// lets its task go on by itself: the backoff of a program retrying a call
// that failed, seconds that grow with each attempt (an agent CLI whose
// model is out of reach: codex's ran up to 9 s). It counts until the first
// such timer seen after that wait is due, the soonest of the tasks that
// waited on the network if one of them waits on one, else, once they have
// waited on none for TimerConfirm since the network, the soonest of any
// task: a backoff ends in the next attempt, on the network, and a timer
// that falls due without one was the program's own. Such timers, seconds
// off, an idle prompt keeps too (codex's, 2 to 8 s off, over and over),
// and without a wait on the network before them they are taken as the
// program's own.
const Backoff = 30 * time.Second

func (v Verdict) String() string {
	switch v {
	case Idle:
		return "idle"
	case Input:
		return "input"
	case Progress:
		return "progress"
	case Network:
		return "network"
	case Busy:
		return "running"
	}
	return "verdict " + strconv.Itoa(int(v))
}

func (v Verdict) state() State {
	switch v {
	case Input:
		return WaitingForInput
	case Progress:
		return Waiting
	case Network:
		return WaitingForNetwork
	}
	return Running
}

// Task is one task (thread) of a session at one check, the evidence for the
// session's state.
type Task struct {
	Pid, Tid int
	Command  string
	// Syscall is "running" or the system call the task is blocked in.
	Syscall string
	Verdict Verdict
	// TimeoutMs is the longest the wait lasts, -1 for no limit.
	TimeoutMs int64
	Files     []File
}

// File is one file a blocked task waits on.
type File struct {
	Fd      int
	Kind    string
	Detail  string
	Verdict Verdict
}
