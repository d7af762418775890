package daemon

import (
	"slices"
	"sync"
	"testing"
	"time"

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
