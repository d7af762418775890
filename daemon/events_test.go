package daemon

import (
	"slices"
	"testing"

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
