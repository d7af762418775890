package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// The daemon's open-file limit bounds how many sessions it holds, so an
// idle session may hold no descriptor beyond its ends of the three stdio
// pipes and what the backend keeps (the fake backend: its child's pidfd).
// Its input-state probe, running once the session waits for input, holds
// none of its own.
func TestIdleSessionHoldsOnlyItsStdioDescriptors(t *testing.T) {
	h := startDaemon(t)
	fds := func() map[string]string {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range ents {
			target, _ := os.Readlink("/proc/self/fd/" + e.Name())
			out[e.Name()] = target
		}
		return out
	}
	// Waiting for input says the probe runs; where inputwait cannot tell
	// (it reads amd64 system calls only), there is none to wait for.
	idle := sandboxdv1.State_WAITING_FOR_INPUT
	if runtime.GOARCH != "amd64" {
		idle = sandboxdv1.State_RUNNING
	}
	// The first session opens what every later one shares (the /proc the
	// probes read through), so the count starts after it.
	first := h.open(detached(sh("read x"))).finish()
	if first.started == nil {
		t.Fatalf("detached start: %v", first.err)
	}
	h.waitState(first.started.GetSessionId(), idle)
	before := fds()
	const n = 10
	for range n {
		s := h.open(detached(sh("read x"))).finish()
		if s.started == nil {
			t.Fatalf("detached start: %v", s.err)
		}
		h.waitState(s.started.GetSessionId(), idle)
	}
	after := fds()
	var added []string
	for fd, target := range after {
		if before[fd] != target {
			added = append(added, target)
		}
	}
	if len(added) > 4*n {
		t.Errorf("%d idle sessions took %d descriptors, want at most 4 each (3 stdio pipes, the fake backend's pidfd): %s",
			n, len(added), strings.Join(added, " "))
	}
}
