package daemon

import (
	"runtime/debug"
	"sync"
	"time"
)

// heapTrimAfter is how long sessions must neither start nor end before
// the daemon hands its unused heap back to the OS; heapTrimEvery is the
// least time between two trims, so that launches a little more than
// heapTrimAfter apart do not each cost a collection of the whole heap.
const (
	heapTrimAfter = time.Second
	heapTrimEvery = 30 * time.Second
)

// heapTrim returns the heap that a burst of launches left unused once
// launches have gone quiet. The runtime's scavenger keeps free heap up to
// its next collection's goal, about as much again as is live: with a
// thousand idle sessions that is some 8 KiB of resident memory per
// session that nothing uses until the next burst. One collection and
// scavenge per quiet spell costs a few milliseconds and never happens
// while launches keep coming.
type heapTrim struct {
	after, every time.Duration
	free         func()

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	last    time.Time // of the latest trim
}

func newHeapTrim() *heapTrim {
	return &heapTrim{after: heapTrimAfter, every: heapTrimEvery, free: debug.FreeOSMemory}
}

// fire trims, or waits until heapTrimEvery has passed since the last.
func (t *heapTrim) fire() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	if wait := t.every - time.Since(t.last); !t.last.IsZero() && wait > 0 {
		t.timer.Reset(wait)
		t.mu.Unlock()
		return
	}
	t.last = time.Now()
	t.mu.Unlock()
	t.free()
}

// touch notes a session starting or ending: the quiet spell starts again.
func (t *heapTrim) touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.stopped:
	case t.timer == nil:
		t.timer = time.AfterFunc(t.after, t.fire)
	default:
		t.timer.Reset(t.after)
	}
}

// stop ends the trimming: a daemon that is closing frees what it frees.
func (t *heapTrim) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.timer != nil {
		t.timer.Stop()
	}
}
