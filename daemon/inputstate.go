package daemon

import (
	"errors"
	"time"

	"github.com/sandboxd/sandboxd/internal/inputwait"
)

// The input state is polled from the kernel's view of the session's
// processes. Polling backs off while nothing changes, so an idle session
// costs a check a second, and comes back to the fastest rate whenever the
// session prints or is given input: the moments a program starts or stops
// waiting are usually right after those.
const (
	inputPollMin = 50 * time.Millisecond
	inputPollMax = time.Second
)

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
		if !errors.Is(err, errors.ErrUnsupported) {
			s.logf("session %s: cannot tell when it waits for input: %v", sess.id, err)
		}
		return
	}
	defer probe.Close()
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
			interval = min(2*interval, inputPollMax)
		}
		t.Reset(interval)
	}
}
