package daemon

import (
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
