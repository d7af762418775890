package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"sync"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/inputwait"
	"github.com/sandboxd/sandboxd/launcher"
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

// progressDwell is the least time a session shows RUNNING, WAITING or
// WAITING_FOR_NETWORK before it moves between them. A program retrying a
// call that fails (an agent CLI whose model is out of reach) alternates
// between working and waiting several times a second; each move is an
// event to every watcher and a line of the audit trail, and none of them
// tells a supervisor more than that the session is busy. Moves to and from
// WAITING_FOR_INPUT are never held: that a session waits for its input, or
// has stopped waiting once given it, is what a supervisor acts on.
const progressDwell = time.Second

// slowestInputPoll is the slowest rate of checks with watched sessions
// watching their input.
func slowestInputPoll(watched int64) time.Duration {
	return max(inputPollMax, time.Duration(watched)*time.Second/idleChecksPerSecond)
}

// watchInput keeps sess moving between RUNNING and the waiting states
// (WAITING_FOR_INPUT, WAITING, WAITING_FOR_NETWORK) until the returned stop
// is called. It gives up, and says so once, when the kernel's view cannot
// be read: the session then simply stays RUNNING. The checks run from a
// timer rather than a goroutine of their own, so that an idle session
// holds no goroutine stack for them between checks.
func (s *Service) watchInput(sess *session, sio *stdio) (stop func()) {
	var probe *inputwait.Probe
	var err error
	if sio.tty {
		var master *os.File
		if master, err = sio.stdin.File(); err == nil {
			probe, err = inputwait.ForTerminal(sess.pidOf(), master)
		}
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
		return func() {}
	}
	if sess.rootIsInit() {
		probe.ExcludeRoot()
	}
	if net := sess.policy.GetNetwork(); net.GetMode() != sandboxdv1.Network_HOST {
		probe.PrivateLoopback(waysOut(net))
	}
	sess.probe.Store(probe)
	s.inputWatches.Add(1)
	w := &inputWatch{s: s, sess: sess, probe: probe, interval: inputPollMin, shown: sandboxdv1.State_RUNNING}
	w.mu.Lock()
	w.t = time.AfterFunc(inputPollMin, w.check)
	w.mu.Unlock()
	sess.watch.Store(w)
	return w.stop
}

// inputWatch is the state of one session's input-state polling
// (watchInput).
type inputWatch struct {
	s     *Service
	sess  *session
	probe *inputwait.Probe
	t     *time.Timer

	mu       sync.Mutex
	interval time.Duration
	// shown is the state the checks last gave the session, at shownAt.
	shown   sandboxdv1.State
	shownAt time.Time
	// checking is set while a check runs; poked notes activity meanwhile,
	// which brings the next check to the fastest rate once it is over.
	checking, poked bool
	over            bool // stopped, or given up
	inflight        sync.WaitGroup
	end             sync.Once
}

// poke notes output or input: the next check comes at the fastest rate.
// At that rate already, the check stays due: a session printing more often
// than that (a spinner) would otherwise push it off for as long as it
// prints.
func (w *inputWatch) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.over:
	case w.checking:
		w.poked = true
	case w.interval > inputPollMin:
		w.interval = inputPollMin
		w.t.Reset(inputPollMin)
	}
}

func (w *inputWatch) check() {
	w.mu.Lock()
	if w.over || w.checking {
		w.mu.Unlock()
		return
	}
	w.checking, w.poked = true, false
	w.inflight.Add(1)
	w.mu.Unlock()
	defer w.inflight.Done()

	st, err := w.probe.Check()
	var changed bool
	var held time.Duration
	if err == nil {
		to := stateOf[st]
		if held = w.holdFor(to, time.Now()); held == 0 {
			changed, err = w.sess.setActivity(to)
			if changed {
				w.shown, w.shownAt = to, time.Now()
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		// fs.ErrNotExist: the command has ended, and stop follows.
		err = fmt.Errorf("session %s: cannot tell when it waits for input any more: %w", w.sess.id, err)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.checking = false
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			w.s.logf("%v", err)
		}
		w.over = true
		w.finish()
		return
	}
	if w.over {
		return
	}
	if changed || w.poked {
		w.interval = inputPollMin
	} else {
		w.interval = min(2*w.interval, slowestInputPoll(w.s.inputWatches.Load()))
	}
	next := w.interval
	if held > 0 {
		// The check after the dwell tells the state then, not the one
		// held back, which may be over.
		next = min(next, held)
	}
	w.t.Reset(next)
}

// holdFor says how long a move of the session to state to must wait for
// the dwell of the state shown now (progressDwell), at now; 0 when it may
// move at once or is not moving.
func (w *inputWatch) holdFor(to sandboxdv1.State, now time.Time) time.Duration {
	if to == w.shown || to == sandboxdv1.State_WAITING_FOR_INPUT || w.shown == sandboxdv1.State_WAITING_FOR_INPUT {
		return 0
	}
	return max(0, progressDwell-now.Sub(w.shownAt))
}

// stop ends the polling and waits for a check under way.
func (w *inputWatch) stop() {
	w.mu.Lock()
	w.over = true
	w.t.Stop()
	w.mu.Unlock()
	w.inflight.Wait()
	w.finish()
}

func (w *inputWatch) finish() {
	w.end.Do(func() {
		w.sess.watch.Store(nil)
		w.sess.probe.Store(nil)
		w.probe.Close()
		w.s.inputWatches.Add(-1)
	})
}

// stateOf is the session state for each of inputwait's.
var stateOf = map[inputwait.State]sandboxdv1.State{
	inputwait.Running:           sandboxdv1.State_RUNNING,
	inputwait.WaitingForInput:   sandboxdv1.State_WAITING_FOR_INPUT,
	inputwait.Waiting:           sandboxdv1.State_WAITING,
	inputwait.WaitingForNetwork: sandboxdv1.State_WAITING_FOR_NETWORK,
}

// waits is the evidence for the session's state, for Inspect: what each of
// its tasks is blocked on now. Nil when nothing watches the session's
// input (it has ended, or this host cannot tell).
func (s *session) waits() []*sandboxdv1.TaskWait {
	probe := s.probe.Load()
	if probe == nil {
		return nil
	}
	_, tasks, err := probe.Explain()
	if err != nil {
		return nil
	}
	out := make([]*sandboxdv1.TaskWait, 0, len(tasks))
	for _, t := range tasks {
		w := &sandboxdv1.TaskWait{Pid: int32(t.Pid), Tid: int32(t.Tid), Command: t.Command, Syscall: t.Syscall,
			Verdict: t.Verdict.String(), TimeoutMs: t.TimeoutMs}
		for _, f := range t.Files {
			w.Files = append(w.Files, &sandboxdv1.WaitedFile{Fd: int32(f.Fd), Kind: f.Kind, Detail: f.Detail, Verdict: f.Verdict.String()})
		}
		out = append(out, w)
	}
	return out
}

// rootIsInit says whether the session's outermost process is its backend's
// init rather than its command (launcher.InitProcess).
func (s *session) rootIsInit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, ok := s.proc.(launcher.InitProcess)
	return ok && ip.PidIsInit()
}

// waysOut are the addresses of a sandbox's own loopback that lead out of
// it: the daemon's proxy, and the ports of the host's loopback an
// allowlist names, forwarded there.
func waysOut(net *sandboxdv1.Network) []netip.AddrPort {
	if net.GetMode() != sandboxdv1.Network_ALLOWLIST {
		return nil
	}
	out := []netip.AddrPort{netip.MustParseAddrPort(launcher.ProxyAddress)}
	for _, a := range net.GetAllow() {
		if (a.GetHost() == "127.0.0.1" || a.GetHost() == "localhost") && a.GetPort() > 0 && a.GetPort() <= 0xffff {
			out = append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(a.GetPort())))
		}
	}
	return out
}
