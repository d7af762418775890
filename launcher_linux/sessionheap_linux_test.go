package launcherlinux

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/sandboxd/sandboxd/launcher"
)

// liveHeap is the heap the last collection, forced here, found live.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A running session keeps what its end needs, not the plan it was started
// with: the plan's mount steps alone are some 5 KiB, held for as long as
// the session lasts, where the backend's own state of a session is under
// 1 KiB.
func TestARunningSessionDoesNotKeepItsPlan(t *testing.T) {
	b := newBackend(t)
	// What a first launch makes once (the init pool, the spawner, caches)
	// is not the sessions'.
	if _, _, st := runWith(t, b, nil, "/bin/true"); st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	const n = 20
	var ps []launcher.Process
	t.Cleanup(func() {
		for _, p := range ps {
			p.Kill()
			p.Wait()
		}
	})
	before := liveHeap()
	for range n {
		p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/sleep", "1000"))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	after := liveHeap()
	per := (int64(after) - int64(before)) / n
	t.Logf("%d bytes of live heap a running session", per)
	if per > 3<<10 {
		t.Errorf("each running session keeps %d bytes of live heap, want at most 3 KiB", per)
	}
}
