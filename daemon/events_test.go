package daemon

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// A watcher that stops reading is cut off once its queue is full, not
// skipped ahead: it learns it missed events.
func TestEventBusCutsOffAWatcherThatFellBehind(t *testing.T) {
	var sunk []uint64
	b := newEventBus(func(ev *sandboxdv1.Event, _ *eventDetail) { sunk = append(sunk, ev.GetSeq()) })
	slow, fast := b.subscribe(), b.subscribe()
	for i := 0; i < watcherQueue+1; i++ {
		b.publish(&sandboxdv1.Event{SessionId: "s"}, nil)
		<-fast.ch
	}
	select {
	case <-slow.behind:
	default:
		t.Fatal("slow watcher not cut off")
	}
	select {
	case <-fast.behind:
		t.Fatal("a watcher that keeps up was cut off")
	default:
	}
	if len(sunk) != watcherQueue+1 || sunk[0] != 1 || sunk[len(sunk)-1] != watcherQueue+1 {
		t.Errorf("sinks saw %d events, %v..%v", len(sunk), sunk[0], sunk[len(sunk)-1])
	}
	if n := len(slow.ch); n != watcherQueue {
		t.Errorf("slow watcher holds %d events", n)
	}
}

// A launch's move to RUNNING reaches the watchers at once and the sinks
// (the audit log) at the next flush or event, whichever is first, and
// never after an event numbered later.
func TestEventBusRecordsTheMoveToRunningInOrder(t *testing.T) {
	var sunk []uint64
	b := newEventBus(func(ev *sandboxdv1.Event, _ *eventDetail) { sunk = append(sunk, ev.GetSeq()) })
	w := b.subscribe()
	toRunning := func(id string) *sandboxdv1.Event {
		return &sandboxdv1.Event{SessionId: id, Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_STARTING, To: sandboxdv1.State_RUNNING}}}
	}
	b.publish(toRunning("a"), nil)
	if got := (<-w.ch).GetSeq(); got != 1 {
		t.Fatalf("watcher got event %d first, want 1", got)
	}
	if len(sunk) != 0 {
		t.Fatalf("sinks ran for the move to RUNNING before a flush: %v", sunk)
	}
	b.flush()
	b.publish(toRunning("b"), nil)
	b.publish(&sandboxdv1.Event{SessionId: "b", Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_EXITED}}}, nil)
	b.flush()
	if want := []uint64{1, 2, 3}; !slices.Equal(sunk, want) {
		t.Errorf("sinks saw events %v, want %v", sunk, want)
	}
}

// The denials past a session's limit that no later denial or end follows
// are summed up all the same, once suppressedEvery has passed; a summary
// is never written twice.
func TestEventBusSumsUpAQuietSessionsSuppressedDenials(t *testing.T) {
	saved := suppressedEvery
	suppressedEvery = 50 * time.Millisecond
	t.Cleanup(func() { suppressedEvery = saved })
	var mu sync.Mutex
	var recorded, unrecorded int
	var sums []uint64
	b := newEventBus(func(ev *sandboxdv1.Event, d *eventDetail) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case d.suppressed != nil:
			sums = append(sums, d.suppressed.count)
		case d.unrecorded:
			unrecorded++
		case ev.GetDenial() != nil:
			recorded++
		}
	})
	for range denialBurst + 5 {
		b.publish(&sandboxdv1.Event{SessionId: "s", Kind: &sandboxdv1.Event_Denial{Denial: &sandboxdv1.Denial{Field: "filesystem.write"}}}, nil)
	}
	// A timer may fire while the denials are still coming (a slow
	// machine): there is then more than one summary, which together sum up
	// every unrecorded denial.
	summed := func() (n int, all bool) {
		mu.Lock()
		defer mu.Unlock()
		var total uint64
		for _, c := range sums {
			total += c
		}
		return len(sums), unrecorded > 0 && total == uint64(unrecorded)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, all := summed(); all {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%d denials unrecorded, summaries %v: not all summed up", unrecorded, sums)
		}
	}
	before, _ := summed()
	b.publish(&sandboxdv1.Event{SessionId: "s", Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_EXITED}}}, nil)
	mu.Lock()
	defer mu.Unlock()
	// Each recorded denial took one of the burst's tokens; the ones past
	// it are at most the five plus what refilled meanwhile.
	if recorded+unrecorded != denialBurst+5 || len(sums) != before {
		t.Errorf("%d denials recorded, %d unrecorded, summaries %v (%d before the end); want %d in all and no summary at the end", recorded, unrecorded, sums, before, denialBurst+5)
	}
}

// denialSink counts, per session, the denials recorded and those summed
// up, and the summaries' times.
type denialSink struct {
	mu                 sync.Mutex
	recorded, summedUp map[string]uint64
	summaryTimes       []time.Time
	calls              int
}

func newDenialSink() *denialSink {
	return &denialSink{recorded: map[string]uint64{}, summedUp: map[string]uint64{}}
}

func (k *denialSink) sink(ev *sandboxdv1.Event, d *eventDetail) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	switch {
	case d.suppressed != nil:
		k.summedUp[ev.GetSessionId()] += d.suppressed.count
		k.summaryTimes = append(k.summaryTimes, ev.GetTime().AsTime())
	case d.unrecorded:
	case ev.GetDenial() != nil:
		k.recorded[ev.GetSessionId()]++
	}
}

func denialEvent(id, parent string) *sandboxdv1.Event {
	return &sandboxdv1.Event{SessionId: id, ParentId: parent, Kind: &sandboxdv1.Event_Denial{Denial: &sandboxdv1.Denial{Field: "filesystem.write"}}}
}

func endEvent(id string) *sandboxdv1.Event {
	return &sandboxdv1.Event{SessionId: id, Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_EXITED}}}
}

// A sandbox's children share its tree's bucket, and an owner's trees their
// owner's: neither many children nor many sessions write more denials
// than the one limit, another owner's are recorded all the same, and what
// each session recorded and had summed up adds up to its denials.
func TestEventBusLimitsDenialsPerTreeAndPerOwner(t *testing.T) {
	k := newDenialSink()
	b := newEventBus(k.sink)
	published := map[string]uint64{}
	deny := func(id, parent, tree, owner string) {
		b.publish(denialEvent(id, parent), &eventDetail{tree: tree, owner: owner})
		published[id]++
	}
	start := time.Now()
	// One tree of a root and 200 children, 10 denials each; children
	// ended early leave the tree's bucket as it is.
	for i := range 200 {
		child := fmt.Sprintf("child%d", i)
		for range 10 {
			deny(child, "root", "root", "uid 1000")
		}
		b.publish(endEvent(child), nil)
	}
	// The same owner's 200 more trees, 100 denials each.
	for i := range 200 {
		id := fmt.Sprintf("tree%d", i)
		for range 100 {
			deny(id, "", id, "uid 1000")
		}
	}
	took := time.Since(start)
	for i := range 10 {
		deny(fmt.Sprintf("other%d", i), "", fmt.Sprintf("other%d", i), "uid 2000")
	}
	for id := range published {
		b.publish(endEvent(id), nil)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var tree, owner uint64
	for id, n := range k.recorded {
		switch {
		case strings.HasPrefix(id, "child"):
			tree += n
		case strings.HasPrefix(id, "tree"):
			owner += n
		}
	}
	refill := took.Seconds() + 1
	if most := uint64(denialBurst + denialRate*refill); tree > most {
		t.Errorf("one tree's 200 children recorded %d denials in %v, want at most %d", tree, took, most)
	}
	if most := uint64(ownerDenialBurst + ownerDenialRate*refill); tree+owner > most {
		t.Errorf("one owner's sessions recorded %d denials in %v, want at most %d", tree+owner, took, most)
	}
	for i := range 10 {
		if id := fmt.Sprintf("other%d", i); k.recorded[id] != 1 {
			t.Errorf("another owner's session %s recorded %d denials of 1", id, k.recorded[id])
		}
	}
	for id, n := range published {
		if got := k.recorded[id] + k.summedUp[id]; got != n {
			t.Errorf("session %s: %d denials recorded and %d summed up, want %d in all", id, k.recorded[id], k.summedUp[id], n)
		}
	}
}

// The summary written at a session's end is dated as the end is, which it
// precedes.
func TestEventBusDatesTheEndsSummaryAsTheEnd(t *testing.T) {
	k := newDenialSink()
	b := newEventBus(k.sink)
	for range denialBurst + 3 {
		b.publish(denialEvent("s", ""), nil)
	}
	end := endEvent("s")
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	end.Time = timestamppb.New(at)
	b.publish(end, nil)
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.summaryTimes) != 1 || !k.summaryTimes[0].Equal(at) {
		t.Errorf("summaries dated %v, want one dated %v as the end", k.summaryTimes, at)
	}
}

// close writes the summary a timer would have, stops the timer, and hands
// the sinks nothing after: the audit log is closed next.
func TestEventBusCloseWritesPendingSummariesAndNothingAfter(t *testing.T) {
	saved := suppressedEvery
	suppressedEvery = 20 * time.Millisecond
	t.Cleanup(func() { suppressedEvery = saved })
	k := newDenialSink()
	b := newEventBus(k.sink)
	// A timer left from before close would fire within the sleep below.
	for range denialBurst + 3 {
		b.publish(denialEvent("s", ""), nil)
	}
	b.close()
	k.mu.Lock()
	summed, calls := k.summedUp["s"], k.calls
	k.mu.Unlock()
	if summed == 0 || k.recorded["s"]+summed != denialBurst+3 {
		t.Errorf("after close %d denials recorded and %d summed up, want %d in all", k.recorded["s"], summed, denialBurst+3)
	}
	for range 3 {
		b.publish(denialEvent("s", ""), nil)
	}
	b.publish(endEvent("s"), nil)
	time.Sleep(5 * suppressedEvery)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.calls != calls {
		t.Errorf("the sinks ran %d times after close", k.calls-calls)
	}
}
