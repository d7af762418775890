package daemon

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync/atomic"
)

// GCFloor is the least room the collector gives the heap to grow between
// two collections. A launch leaves some 80 KiB of garbage in a heap of
// which a few MiB live, so at the runtime's default (room as large as the
// live heap, 4 MiB at least) a daemon launching hundreds of sandboxes a
// second collected every 30 or so launches, and each collection's fixed
// part (waking a worker on every processor, scanning every goroutine's
// stack) cost more than the launches' own marking: about a tenth of the
// daemon's CPU per launch. Once the live heap is larger than the floor
// (a daemon holding thousands of sessions) the default applies unchanged,
// and heapTrim hands back what a burst left unused once launches stop.
const GCFloor = 8 << 20

// KeepGCFloor makes every collection leave the heap about floor bytes of
// room before the next while the live heap is smaller than floor, unless
// the operator set GOGC. It runs, looking again at the live heap after each
// collection, until stop is called: the daemon never does.
func KeepGCFloor(floor uint64) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	t := &gcFloor{floor: floor, percent: 100, sample: []rtmetrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	t.arm()
	return func() { t.stopped.Store(true) }
}

type gcFloor struct {
	floor   uint64
	percent int
	sample  []rtmetrics.Sample
	stopped atomic.Bool
}

// gcCycle is unreachable as soon as it is made: its cleanup runs once the
// next collection has found that, and makes the next one. The pointer
// field is there because a zero-size or small pointer-free object may be
// the runtime's shared zero object or share a tiny block with others, and
// then its cleanup never runs.
type gcCycle struct{ _ *byte }

func (t *gcFloor) arm() {
	runtime.AddCleanup(new(gcCycle), func(t *gcFloor) {
		if !t.stopped.Load() {
			t.adjust()
			t.arm()
		}
	}, t)
}

// heapMinimum is the runtime's least heap goal at GOGC=100; it scales with
// the percentage like the room does.
const heapMinimum = 4 << 20

// adjust sets the room after the collection that just ended. The runtime's
// goal is the live heap plus percent of what it scans (the live heap,
// stacks and globals), and at least heapMinimum scaled by percent, so the
// percentage that gives a room of floor is the smaller of the two that
// each put the goal at live+floor.
func (t *gcFloor) adjust() {
	rtmetrics.Read(t.sample)
	percent := 100
	live := t.sample[0].Value.Uint64()
	if scanned := live + t.sample[1].Value.Uint64() + t.sample[2].Value.Uint64(); live > 0 && live < t.floor {
		percent = int(max(100, min(t.floor*100/scanned, (live+t.floor)*100/heapMinimum)))
	}
	// A change of less than a quarter is not worth the heap lock.
	if percent*4 < t.percent*3 || percent*4 > t.percent*5 {
		debug.SetGCPercent(percent)
		t.percent = percent
	}
}
