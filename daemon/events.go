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

// A session tree's denials are recorded (numbered, written to the audit
// log, sent to watchers) up to denialBurst at once and denialRate a second
// after that, and an owner's, all its trees together, up to
// ownerDenialBurst and ownerDenialRate: a denial takes a token from both
// buckets. A sandbox refused in a loop would otherwise write the audit log
// as fast as it loops, rotating every other session's records out of it,
// and push every watcher past watcherQueue; a bucket per session would let
// it start children (or its owner more sessions, up to --max-sessions),
// each with a full bucket. The tree's bucket outlives the sessions in it,
// so an ended one's children, or a new child, start on what is left. The
// ones beyond the limit still count (the session's denial_count, its
// recent denials, the metrics), and the audit log sums them up per session
// at most every suppressedEvery, and at the session's end.
const (
	denialBurst      = 100
	denialRate       = 10
	ownerDenialBurst = 1000
	ownerDenialRate  = 100
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
	// tree and owner, on a denial, name the buckets it is charged to: the
	// id of its session tree's root and its owner's key (ownerKey). An
	// empty tree is the session's own id.
	tree, owner string
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

// denialBucket is one tree's or owner's token bucket for recorded denials.
type denialBucket struct {
	tokens float64
	refill time.Time
	// full is how long the bucket takes to fill from empty: one idle that
	// long is as a new one would be.
	full time.Duration
}

// take refills the bucket up to burst at rate tokens a second and says
// whether it holds a token, which it takes only if spend.
func (k *denialBucket) take(now time.Time, burst, rate float64, spend bool) bool {
	k.tokens = min(burst, k.tokens+now.Sub(k.refill).Seconds()*rate)
	k.refill = now
	if k.tokens < 1 {
		return false
	}
	if spend {
		k.tokens--
	}
	return true
}

// suppressed is what one session has not recorded since its last summary.
type suppressed struct {
	parent  string
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
	// buckets are the denial limits of the trees ("tree " and the root's
	// id) and owners ("owner " and ownerKey) that had denials; sweepAt is
	// their count at which idle ones are dropped.
	buckets map[string]*denialBucket
	sweepAt int
	// unrecorded are the sessions with denials not yet summed up.
	unrecorded map[string]*suppressed
	// closed is set by close: the sinks (the audit log) are gone.
	closed bool
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
	return &eventBus{sinks: sinks, watchers: map[*watcher]struct{}{}, buckets: map[string]*denialBucket{}, unrecorded: map[string]*suppressed{}, sweepAt: minSweep}
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
	if dn := ev.GetDenial(); dn != nil && !b.admitLocked(ev, dn, d) {
		d.unrecorded = true
		b.sinkLocked(ev, d)
		return b.seq
	}
	if st := ev.GetState(); st != nil && terminal(st.GetTo()) {
		// The sum of its unrecorded denials comes before its end, and is
		// dated as it is.
		b.summarizeLocked(ev.GetSessionId(), ev.GetTime())
	}
	b.seq++
	ev.Seq = b.seq
	if deferred(ev) && !b.closed {
		b.pending = append(b.pending, pendingEvent{ev, d})
	} else {
		b.sinkLocked(ev, d)
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
		b.sinkLocked(p.ev, p.d)
		b.pending[i] = pendingEvent{}
	}
	b.pending = b.pending[:0]
}

// sinkLocked hands ev to the sinks, unless the bus is closed.
func (b *eventBus) sinkLocked(ev *sandboxdv1.Event, d *eventDetail) {
	if b.closed {
		return
	}
	for _, sink := range b.sinks {
		sink(ev, d)
	}
}

// close writes every pending summary and stops their timers, and hands
// nothing to the sinks after: the Service closes the audit log next.
func (b *eventBus) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	for id := range b.unrecorded {
		b.summarizeLocked(id, nil)
	}
	b.closed = true
}

// admitLocked takes a token from the buckets of ev's tree and owner, and
// says whether both had one; a denial without one joins its session's
// pending summary.
func (b *eventBus) admitLocked(ev *sandboxdv1.Event, dn *sandboxdv1.Denial, d *eventDetail) bool {
	now := time.Now()
	id := ev.GetSessionId()
	tree := d.tree
	if tree == "" {
		tree = id
	}
	b.sweepLocked(now)
	tb := b.bucketLocked("tree "+tree, now, denialBurst, denialRate)
	ob := b.bucketLocked("owner "+d.owner, now, ownerDenialBurst, ownerDenialRate)
	// Neither is spent unless both have a token.
	if tb.take(now, denialBurst, denialRate, false) && ob.take(now, ownerDenialBurst, ownerDenialRate, false) {
		tb.tokens--
		ob.tokens--
		return true
	}
	u := b.unrecorded[id]
	if u == nil {
		u = &suppressed{parent: ev.GetParentId()}
		b.unrecorded[id] = u
	}
	p := &u.pending
	if p.count == 0 {
		p.first = ev.GetTime().AsTime()
		u.timer = time.AfterFunc(suppressedEvery, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.unrecorded[id] != u {
				// Summed up already, at the session's end or close.
				return
			}
			b.flushLocked()
			b.summarizeLocked(id, nil)
		})
	}
	p.count++
	p.last = ev.GetTime().AsTime()
	p.latest = dn
	return false
}

// bucketLocked returns the bucket of key, a full one if it had none.
func (b *eventBus) bucketLocked(key string, now time.Time, burst, rate float64) *denialBucket {
	k := b.buckets[key]
	if k == nil {
		k = &denialBucket{tokens: burst, refill: now, full: time.Duration(burst / rate * float64(time.Second))}
		b.buckets[key] = k
	}
	return k
}

// summarizeLocked hands the sinks the sum of session id's unrecorded
// denials, if any, dated at, or now if at is nil.
func (b *eventBus) summarizeLocked(id string, at *timestamppb.Timestamp) {
	u := b.unrecorded[id]
	if u == nil {
		return
	}
	delete(b.unrecorded, id)
	u.timer.Stop()
	if at == nil {
		at = timestamppb.Now()
	}
	sum := u.pending
	b.sinkLocked(&sandboxdv1.Event{Time: at, SessionId: id, ParentId: u.parent}, &eventDetail{suppressed: &sum})
}

// sweepLocked drops the buckets that are as a new one would be, full,
// once there are twice as many as after the last sweep: a tree or owner
// may have denials again at any time, but a full bucket is the same as
// none.
func (b *eventBus) sweepLocked(now time.Time) {
	if len(b.buckets) < b.sweepAt {
		return
	}
	for key, k := range b.buckets {
		if now.Sub(k.refill) >= k.full {
			delete(b.buckets, key)
		}
	}
	b.sweepAt = max(minSweep, 2*len(b.buckets))
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
