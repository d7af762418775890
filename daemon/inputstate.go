package daemon

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/internal/inputwait"
)

// The input state is polled from the kernel's view of the session's
// processes. Polling backs off while nothing changes, and comes back to the
// fastest rate whenever the session prints or is given input: the moments
// a program starts or stops waiting are usually right after those. The
// slowest rate is what idle sessions cost, and it slows further with their
// number, so that together they never take more than idleChecksPerSecond:
// what idle sessions cost does not grow with how many there are. At a
// check every 10 s, 500 of them (sleep, pipes) took the daemon 1.7% of a
// core, where a check a second took 8.5%; the checks are reads of /proc.
const (
	inputPollMin        = 50 * time.Millisecond
	inputPollMax        = 10 * time.Second
	idleChecksPerSecond = 50
)

// slowestInputPoll is the slowest rate of checks with watched sessions
// watching their input.
func slowestInputPoll(watched int64) time.Duration {
	return max(inputPollMax, time.Duration(watched)*time.Second/idleChecksPerSecond)
}

// watchInput keeps sess moving between RUNNING and WAITING_FOR_INPUT until
// stop is closed. It gives up, and says so once, when the kernel's view
// cannot be read: the session then simply stays RUNNING.
func (s *Service) watchInput(sess *session, sio *stdio, stop <-chan struct{}) {
	var probe *inputwait.Probe
	var err error
	if sio.tty {
		probe, err = inputwait.ForTerminal(sess.pidOf(), sio.stdin)
	} else {
		probe, err = inputwait.ForPipe(sess.pidOf(), sio.stdin)
	}
	if err != nil {
		// A stdin closed already (the client had no input: sandboxctl
		// with stdin from /dev/null) is at EOF: no read of it ever waits.
		// A command gone already waits for nothing either.
		if !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, fs.ErrNotExist) {
			s.logf("session %s: cannot tell when it waits for input: %v", sess.id, err)
		}
		return
	}
	defer probe.Close()
	s.inputWatches.Add(1)
	defer s.inputWatches.Add(-1)
	interval := inputPollMin
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-sess.activity:
			interval = inputPollMin
			t.Reset(interval)
			continue
		case <-t.C:
		}
		waiting, err := probe.Waiting()
		if errors.Is(err, fs.ErrNotExist) {
			// The command has ended; stop follows.
			return
		}
		if err != nil {
			s.logf("session %s: cannot tell when it waits for input any more: %v", sess.id, err)
			return
		}
		changed, err := sess.setWaiting(waiting)
		if err != nil {
			s.logf("%v", err)
			return
		}
		if changed {
			interval = inputPollMin
		} else {
			interval = min(2*interval, slowestInputPoll(s.inputWatches.Load()))
		}
		t.Reset(interval)
	}
}
