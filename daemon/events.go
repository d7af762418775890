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
	for _, sink := range b.sinks {
		sink(ev, d)
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
