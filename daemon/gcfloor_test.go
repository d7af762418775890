package daemon

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
	"time"
)

func readMetric(name string) uint64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

func TestGCFloorGivesASmallHeapTheFloorsRoom(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	// The live heap as the last collection measured it is what adjust
	// reads, and what the goal is reckoned from.
	runtime.GC()
	live := readMetric("/gc/heap/live:bytes")
	for _, floor := range []uint64{8 << 20, 32 << 20} {
		debug.SetGCPercent(100)
		f := &gcFloor{floor: floor, percent: 100, sample: []rtmetrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
		}}
		f.adjust()
		goal := readMetric("/gc/heap/goal:bytes")
		if room := goal - live; room < floor*3/4 || room > floor*5/4 {
			t.Errorf("floor %d MiB over a live heap of %d KiB: room %d KiB, want about the floor", floor>>20, live>>10, room>>10)
		}
	}
	// A floor below the live heap gives GOGC's default back, from a
	// percentage a smaller heap had raised.
	debug.SetGCPercent(400)
	f := &gcFloor{floor: live / 2, percent: 400, sample: []rtmetrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	f.adjust()
	if got := readMetric("/gc/gogc:percent"); got != 100 {
		t.Errorf("floor below the live heap: GOGC %d, want 100", got)
	}
}

func TestGCFloorAdjustsAfterEachCollection(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	// Unset, not empty: KeepGCFloor leaves a set GOGC alone. t.Setenv
	// puts back what was there.
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	stop := KeepGCFloor(64 << 20)
	// Stopped before the deferred SetGCPercent, so that no later
	// collection of this test binary sets it again.
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for readMetric("/gc/gogc:percent") == 100 {
		if time.Now().After(deadline) {
			t.Fatal("GOGC still 100 after collections: the floor's cleanup did not run")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
