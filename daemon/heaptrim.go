package daemon

import (
	"runtime/debug"
	"sync"
	"time"
)

// heapTrimAfter is how long sessions must neither start nor end before
// the daemon hands its unused heap back to the OS.
const heapTrimAfter = time.Second

// heapTrim returns the heap that a burst of launches left unused once
// launches have gone quiet. The runtime's scavenger keeps free heap up to
// its next collection's goal, about as much again as is live: with a
// thousand idle sessions that is some 8 KiB of resident memory per
// session that nothing uses until the next burst. One collection and
// scavenge per quiet spell costs a few milliseconds and never happens
// while launches keep coming.
type heapTrim struct {
	after time.Duration
	free  func()

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func newHeapTrim() *heapTrim {
	return &heapTrim{after: heapTrimAfter, free: debug.FreeOSMemory}
}

// touch notes a session starting or ending: the quiet spell starts again.
func (t *heapTrim) touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.stopped:
	case t.timer == nil:
		t.timer = time.AfterFunc(t.after, t.free)
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
