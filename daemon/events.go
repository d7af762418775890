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

// A session's denials are recorded (numbered, written to the audit log,
// sent to watchers) up to denialBurst at once and denialRate a second
// after that. A sandbox refused in a loop would otherwise write the audit
// log as fast as it loops, rotating every other session's records out of
// it, and push every watcher past watcherQueue. The ones beyond the limit
// still count (the session's denial_count, its recent denials, the
// metrics), and the audit log sums them up at most every
// suppressedEvery, and at the session's end.
const (
	denialBurst = 100
	denialRate  = 10
)

// suppressedEvery is a variable for the test of a quiet session's summary.
var suppressedEvery = 10 * time.Second

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
	// unrecorded marks a denial past its session's limit: counted, not
	// recorded.
	unrecorded bool
	// suppressed, on an event of no kind, sums up denials not recorded.
	suppressed *denialSummary
}

// denialSummary is what a session's unrecorded denials were.
type denialSummary struct {
	count       uint64
	first, last time.Time
	// latest is the last of them.
	latest *sandboxdv1.Denial
}

// denialLimit is one session's token bucket for recorded denials, and what
// it has not recorded since its last summary.
type denialLimit struct {
	parent  string
	tokens  float64
	refill  time.Time
	pending denialSummary
	// timer writes the summary of pending.
	timer *time.Timer
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
	// limits are the denial limits of the sessions that had denials;
	// sweepAt is their count at which idle ones are dropped.
	limits  map[string]*denialLimit
	sweepAt int
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
	return &eventBus{sinks: sinks, watchers: map[*watcher]struct{}{}, limits: map[string]*denialLimit{}, sweepAt: minSweep}
}

// minSweep is the fewest denial limits the bus keeps before it looks for
// idle ones to drop.
const minSweep = 64

// publish stamps ev with the next sequence number and the time, and
// delivers it. Callers publish a session's events while holding that
// session's lock, so each session's events are numbered in the order its
// state changed. The bus lock is always taken last.
//
// A denial past its session's limit is neither numbered nor sent: the
// sinks see it marked unrecorded, and the latest number is returned, which
// no event of the session is numbered after.
func (b *eventBus) publish(ev *sandboxdv1.Event, d *eventDetail) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Time == nil {
		ev.Time = timestamppb.Now()
	}
	if d == nil {
		d = &eventDetail{}
	}
	b.flushLocked()
	if dn := ev.GetDenial(); dn != nil && !b.admitLocked(ev, dn) {
		d.unrecorded = true
		for _, sink := range b.sinks {
			sink(ev, d)
		}
		return b.seq
	}
	if st := ev.GetState(); st != nil && terminal(st.GetTo()) {
		// The sum of its unrecorded denials comes before its end.
		b.summarizeLocked(ev.GetSessionId(), true)
	}
	b.seq++
	ev.Seq = b.seq
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

// admitLocked takes a token from the bucket of ev's session, and says
// whether there was one; a denial without one joins the pending summary.
func (b *eventBus) admitLocked(ev *sandboxdv1.Event, dn *sandboxdv1.Denial) bool {
	now := time.Now()
	id := ev.GetSessionId()
	l := b.limits[id]
	if l == nil {
		b.sweepLocked(now)
		l = &denialLimit{parent: ev.GetParentId(), tokens: denialBurst, refill: now}
		b.limits[id] = l
	}
	l.tokens = min(denialBurst, l.tokens+now.Sub(l.refill).Seconds()*denialRate)
	l.refill = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	p := &l.pending
	if p.count == 0 {
		p.first = ev.GetTime().AsTime()
		l.timer = time.AfterFunc(suppressedEvery, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.flushLocked()
			b.summarizeLocked(id, false)
		})
	}
	p.count++
	p.last = ev.GetTime().AsTime()
	p.latest = dn
	return false
}

// summarizeLocked hands the sinks the sum of session id's unrecorded
// denials, if any, and forgets its limit when the session has ended.
func (b *eventBus) summarizeLocked(id string, end bool) {
	l := b.limits[id]
	if l == nil {
		return
	}
	if end {
		delete(b.limits, id)
	}
	if l.pending.count == 0 {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	sum := l.pending
	l.pending = denialSummary{}
	ev := &sandboxdv1.Event{Time: timestamppb.Now(), SessionId: id, ParentId: l.parent}
	for _, sink := range b.sinks {
		sink(ev, &eventDetail{suppressed: &sum})
	}
}

// sweepLocked drops the limits that are as a new one would be, their
// bucket full and nothing pending, once there are twice as many as after
// the last sweep: a session whose end the bus saw no denial after has
// none, but a denial may come after the end.
func (b *eventBus) sweepLocked(now time.Time) {
	if len(b.limits) < b.sweepAt {
		return
	}
	full := denialBurst * time.Second / denialRate
	for id, l := range b.limits {
		if l.pending.count == 0 && now.Sub(l.refill) >= full {
			delete(b.limits, id)
		}
	}
	b.sweepAt = max(minSweep, 2*len(b.limits))
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
