package daemon

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
)

func TestGCFloorRaisesTheRoomOfASmallHeapOnly(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	// The live heap as the last collection measured it is what adjust
	// reads.
	runtime.GC()
	live := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(live)
	heap := live[0].Value.Uint64()
	for _, tc := range []struct {
		floor uint64
		want  int
	}{
		// A floor below the live heap leaves GOGC's default.
		{heap / 2, 100},
		{heap * 4, 400},
		// A heap far below the floor grows at most a hundredfold.
		{heap * 1000, 10000},
	} {
		debug.SetGCPercent(100)
		f := &gcFloor{floor: tc.floor, percent: 100, live: live}
		f.adjust()
		// Within the quarter adjust does not act on.
		if got := debug.SetGCPercent(100); got*4 < tc.want*3 || got*4 > tc.want*5 {
			t.Errorf("floor %d over a live heap of %d: GC percent %d, want about %d", tc.floor, heap, got, tc.want)
		}
	}
}
