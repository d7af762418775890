package daemon

import (
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// BenchmarkSessionTrue is the daemon's own share of a launch: a Session
// stream on a real socket from Start to Exit for /bin/true under the
// workspace-write preset, with the audit log written, through the fake
// backend (an unconfined fork and exec), so that the allocations and CPU
// it reports are the daemon's and gRPC's, not the sandbox's. The backend's
// share is launcher_linux's BenchmarkStartTrue.
func BenchmarkSessionTrue(b *testing.B) {
	h := startDaemon(b, func(c *Config) { c.StateDir = b.TempDir() })
	pol, err := policy.Preset("workspace-write", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	start := &sandboxdv1.Start{Policy: pol, Command: &sandboxdv1.Command{Argv: []string{"/bin/true"}}}
	b.ReportAllocs()
	// CPU rather than wall time is the figure: on a loaded machine the
	// wall time is mostly waiting, and the launches a machine can make per
	// second are bounded by the CPU each takes.
	cpu0 := processCPU(b)
	for b.Loop() {
		s := h.open(start).finish()
		if s.err != nil || s.exit.GetState() != sandboxdv1.State_EXITED {
			b.Fatalf("session: %v, exit %v", s.err, s.exit)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, user and system, in
// nanoseconds; its children's (the commands) is not in it.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
