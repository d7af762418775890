package daemon

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// watcherQueue is how many events a watcher may have pending before it is
// cut off. A supervisor that stops reading must not hold events in the
// daemon without bound, nor be skipped ahead without knowing.
const watcherQueue = 1024

// ErrWatcherBehind ends a watch whose client did not keep up.
var ErrWatcherBehind = errors.New("watcher fell behind: more than 1024 events pending")

// eventDetail is what the audit log and the metrics need about an event
// beyond what a watcher is sent.
type eventDetail struct {
	caller      *Caller
	policy      *sandboxdv1.Policy
	digest      string
	cwd         string
	tty         bool
	enforcement *sandboxdv1.EnforcementReport
	// launchLatency is set on the move to RUNNING: from the Start
	// request to the command running.
	launchLatency time.Duration
	// refusedField names the policy field the host could not enforce, on
	// a FAILED_TO_START that was a refusal.
	refusedField string
}

// eventSink receives every event in order, under the bus's lock: it must
// be quick and must not call back into the Service.
type eventSink func(ev *sandboxdv1.Event, d *eventDetail)

// eventBus numbers events and hands them to the sinks (audit log,
// metrics) and to watchers, in one order for all of them.
type eventBus struct {
	mu       sync.Mutex
	seq      uint64
	sinks    []eventSink
	watchers map[*watcher]struct{}
	// pending are events numbered and sent to the watchers whose sinks
	// have not run yet (see deferred), oldest first.
	pending []pendingEvent
}

type pendingEvent struct {
	ev *sandboxdv1.Event
	d  *eventDetail
}

type watcher struct {
	ch chan *sandboxdv1.Event
	// behind is closed when the watcher was cut off for not keeping up.
	behind chan struct{}
}

func newEventBus(sinks ...eventSink) *eventBus {
	return &eventBus{sinks: sinks, watchers: map[*watcher]struct{}{}}
}

// publish stamps ev with the next sequence number and the time, and
// delivers it. Callers publish a session's events while holding that
// session's lock, so each session's events are numbered in the order its
// state changed. The bus lock is always taken last.
func (b *eventBus) publish(ev *sandboxdv1.Event, d *eventDetail) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	if ev.Time == nil {
		ev.Time = timestamppb.Now()
	}
	if d == nil {
		d = &eventDetail{}
	}
	b.flushLocked()
	if deferred(ev) {
		b.pending = append(b.pending, pendingEvent{ev, d})
	} else {
		for _, sink := range b.sinks {
			sink(ev, d)
		}
	}
	for w := range b.watchers {
		select {
		case w.ch <- ev:
		default:
			delete(b.watchers, w)
			close(w.behind)
		}
	}
	return ev.Seq
}

// deferred says whether ev's sinks wait for flush: a launch's move to
// RUNNING, whose audit line (the enforcement report, encoded and written)
// would otherwise come between the sandbox running and its client being
// told. The command runs before the line is written either way; a daemon
// that dies in between leaves the session's start in the log, which the
// next one closes (closeOrphans). The sinks still run in the events'
// order: every publish and flush runs the pending ones first, so the line
// is in the log before anything that follows it, the session's end
// included.
func deferred(ev *sandboxdv1.Event) bool {
	st := ev.GetState()
	return st.GetFrom() == sandboxdv1.State_STARTING && st.GetTo() == sandboxdv1.State_RUNNING
}

// flush runs the sinks of the events whose sinks publish deferred.
func (b *eventBus) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *eventBus) flushLocked() {
	for i, p := range b.pending {
		for _, sink := range b.sinks {
			sink(p.ev, p.d)
		}
		b.pending[i] = pendingEvent{}
	}
	b.pending = b.pending[:0]
}

func (b *eventBus) subscribe() *watcher {
	w := &watcher{ch: make(chan *sandboxdv1.Event, watcherQueue), behind: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watchers[w] = struct{}{}
	return w
}

func (b *eventBus) unsubscribe(w *watcher) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.watchers, w)
}
