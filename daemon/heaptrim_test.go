package daemon

import (
	"testing"
	"time"
)

// A trim comes once after the last touch of a quiet spell, never while
// touches keep coming, and never after stop. The touches come far more
// often than the quiet spell, so that only a stall of a second would
// trim between them.
func TestHeapTrimWaitsForQuiet(t *testing.T) {
	freed := make(chan time.Time, 10)
	tr := &heapTrim{after: time.Second, every: time.Second, free: func() { freed <- time.Now() }}
	start := time.Now()
	var last time.Time
	for time.Since(start) < 1500*time.Millisecond {
		last = time.Now()
		tr.touch()
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case at := <-freed:
		if at.Before(last) {
			t.Fatalf("trimmed at +%v, while sessions still started (last at +%v)", at.Sub(start), last.Sub(start))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no trim after the launches went quiet")
	}
	// Another quiet spell right after: its trim waits for every.
	tr.every = time.Hour
	tr.touch()
	select {
	case <-freed:
		t.Fatal("trimmed twice within heapTrim.every")
	case <-time.After(1500 * time.Millisecond):
	}
	tr.touch()
	tr.stop()
	tr.touch()
	select {
	case <-freed:
		t.Fatal("trimmed after stop")
	case <-time.After(500 * time.Millisecond):
	}
}
