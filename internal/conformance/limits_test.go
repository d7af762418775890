//go:build linux || darwin

package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func limitsPolicy(l *sandboxdv1.Limits) *sandboxdv1.Policy {
	return &sandboxdv1.Policy{Limits: l}
}

func limitsCases() []conformanceCase {
	return []conformanceCase{
		{name: "fork bomb is contained by limits.pids", cgroupLimit: "limits.pids", darwinRefuses: "limits.pids",
			setup: func(f *fixture) spec {
				forks := watchHostForks(f.t)
				return spec{
					policy: limitsPolicy(&sandboxdv1.Limits{Pids: pidsLimit}),
					steps: []step{
						deny("fork-bomb", "1"),
						// Once the bomb is gone, processes start again.
						allow("spawn", "after-bomb-"+randomHex()),
					},
					after: func(t *testing.T, s *session) {
						slowest := forks.stop()
						checkForkBomb(t, s.outcomes[0], pidsLimit/2, pidsLimit)
						if slowest > 2*time.Second {
							t.Errorf("the host took %v to start a process during the bomb", slowest)
						}
						enforcedBy(t, s, "limits.pids")
						want := denialWant{field: "limits.pids", operation: "fork", errno: "EAGAIN"}
						recordedDenials(t, s.res.SessionID, want)
						auditedDenial(t, s.res.SessionID, want)
					},
				}
			}},
		{name: "memory hog is killed by limits.memory_bytes, a program under it runs", cgroupLimit: "limits.memory_bytes",
			darwinRefuses: "limits.memory_bytes", custom: memoryHog},
		{name: "cpu burn is throttled to limits.cpu_millis", cgroupLimit: "limits.cpu_millis", darwinRefuses: "limits.cpu_millis",
			setup: func(f *fixture) spec {
				return spec{
					policy: limitsPolicy(&sandboxdv1.Limits{CpuMillis: cpuLimit}),
					steps:  []step{allow("cpu-burn", "1500ms")},
					after: func(t *testing.T, s *session) {
						d := detailMap(s.outcomes[0])
						cpu, _ := d["cpu_seconds"].(float64)
						wall, _ := d["wall_seconds"].(float64)
						if wall < 1.4 || cpu <= 0 {
							t.Fatalf("cpu-burn did not spin 1.5s: %v", s.outcomes[0])
						}
						if ratio := cpu / wall; ratio > maxCPURatio {
							t.Errorf("a spin under cpu_millis %d got %.2f CPU seconds per wall second (%.2fs in %.2fs); want at most %.2f (about %.1f; unthrottled it gets about 1)",
								cpuLimit, ratio, cpu, wall, maxCPURatio, float64(cpuLimit)/1000)
						}
						enforcedBy(t, s, "limits.cpu_millis")
					},
				}
			}},
		{name: "timeout kills the whole session tree, escaped processes too", custom: timeoutKillsTree,
			// Without a pid namespace the escaped process is not found.
			darwinRefuses: "limits.timeout"},
		{name: "output beyond limits.output_bytes is dropped with one marker, the command runs on", custom: outputCapped},
	}
}

// hostForks times the host starting a process, over and over, while a
// case runs.
type hostForks struct {
	mu      sync.Mutex
	slowest time.Duration
	done    chan struct{}
	wg      sync.WaitGroup
}

func watchHostForks(t *testing.T) *hostForks {
	h := &hostForks{done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			begin := time.Now()
			_ = exec.Command(trueCmd).Run()
			took := time.Since(begin)
			h.mu.Lock()
			h.slowest = max(h.slowest, took)
			h.mu.Unlock()
			select {
			case <-h.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop ends the watch, then times one more start, and returns the slowest.
func (h *hostForks) stop() time.Duration {
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	h.wg.Wait()
	begin := time.Now()
	_ = exec.Command(trueCmd).Run()
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(h.slowest, time.Since(begin))
}

// memoryHog: 16 MiB under a 64 MiB limit runs to its end; 200 MB is killed,
// the session with it, and says why.
func memoryHog(t *testing.T, c conformanceCase, tty bool) {
	pol := limitsPolicy(&sandboxdv1.Limits{MemoryBytes: memoryLimit})
	under := run(t, probeStart(tty, pol, nil, "mem-hog", "16777216"), nil)
	if refusedAsAllowed(t, c, under) {
		return
	}
	exitedCleanly(t, under)
	checkMechanismSet(t, under.res.Enforcement.GetMechanismSet())
	if len(under.outcomes) != 1 || !under.outcomes[0].OK {
		t.Errorf("16 MiB under a limit of 64 MiB must be allocated: %v\n%s", under.outcomes, under)
	}
	enforcedBy(t, under, "limits.memory_bytes")

	over := run(t, probeStart(tty, pol, nil, "mem-hog", "200000000"), nil)
	if over.err != nil {
		t.Fatalf("session: %v\n%s", over.err, over)
	}
	if e := over.exit(); e.GetState() != sandboxdv1.State_KILLED || e.GetReason() != "limit: limits.memory_bytes" || e.GetSignal() != 9 {
		t.Errorf("a 200 MB hog under 64 MiB ended %v signal %d reason %q; want KILLED by signal 9, reason %q\n%s",
			e.GetState(), e.GetSignal(), e.GetReason(), "limit: limits.memory_bytes", over)
	}
	if code := over.exitCode(); code != 128+9 {
		t.Errorf("exit code %d, want %d", code, 128+9)
	}
	if len(over.outcomes) != 0 {
		t.Errorf("the hog finished under the limit: %v", over.outcomes)
	}
	want := denialWant{field: "limits.memory_bytes", operation: "oom-kill"}
	recordedDenials(t, over.res.SessionID, want)
	auditedDenial(t, over.res.SessionID, want)
}

// timeoutKillsTree: a command that leaves behind a process escaping it
// (new session, double fork, reparented) is killed at its timeout, and the
// escaped process with it: it never writes what it was to write after the
// timeout, and no process of the session is left.
func timeoutKillsTree(t *testing.T, c conformanceCase, tty bool) {
	const limit, delay = time.Second, 2500 * time.Millisecond
	f := newFixture(t)
	w := f.mkdir("w")
	late := w + "/late"

	// Outside any sandbox the escaped writer does write.
	control := f.path("control")
	if out, err := exec.Command(suite.probe, "detach-writer", control, "100ms").CombinedOutput(); err != nil {
		t.Fatalf("detach-writer on the host: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(control); string(b) == payload {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("detach-writer on the host did not write %s within 5s", control)
		}
	}

	pol := fsPolicy(list(w), nil, nil)
	pol.Limits = &sandboxdv1.Limits{Timeout: durationpb.New(limit)}
	marker := "tree-" + randomHex()
	begin := time.Now()
	b := runBackground(t, suite.client, probeStart(tty, pol, nil, "detach-writer", late, delay.String(), "hold", marker))
	if !b.outputOrEnd(t, marker+`"`) {
		if refusedAsAllowed(t, c, &session{err: b.err}) {
			return
		}
		t.Fatalf("session ended before it held: %v\noutput: %q", b.err, b.out.String())
	}
	// The holding probe and the escaped writer.
	if pids := processesWith(late); len(pids) < 2 {
		t.Errorf("before the timeout, host processes with %s: %v; want the probe and its escaped writer", late, pids)
	}
	b.wait(t, 20*time.Second)
	if b.err != nil {
		t.Fatalf("session: %v\noutput: %q", b.err, b.out.String())
	}
	if e := b.res.Exit; e.GetState() != sandboxdv1.State_KILLED || e.GetReason() != "timeout" {
		t.Errorf("session ended %v reason %q, want KILLED by timeout", e.GetState(), e.GetReason())
	}
	time.Sleep(time.Until(begin.Add(delay + time.Second)))
	absent(t, late)
	if pids := processesWith(late); len(pids) > 0 {
		t.Errorf("processes %v of the timed-out session are still running", pids)
	}
	enforcedBy(t, &session{res: b.res}, "limits.timeout")
}

// outputOrEnd waits until the session printed s (true) or ended (false).
func (b *background) outputOrEnd(t *testing.T, s string) bool {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(b.out.String(), s) {
		select {
		case <-b.done:
			return strings.Contains(b.out.String(), s)
		case <-deadline:
			t.Fatalf("session did not print %q within 20s; output: %q", s, b.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// outputCapped: past limits.output_bytes the daemon drops the output,
// appends one marker line, records a denial, and lets the command run on:
// it writes a file after the flood and exits 0. The cap is on stdout and
// stderr together.
func outputCapped(t *testing.T, c conformanceCase, tty bool) {
	f := newFixture(t)
	w := f.mkdir("w")
	pol := fsPolicy(list(w), nil, nil)
	pol.Limits = &sandboxdv1.Limits{OutputBytes: outputLimit, Timeout: durationpb.New(30 * time.Second)}
	if runtime.GOOS == "darwin" {
		// macOS refuses limits.timeout, here only a safety net.
		pol.Limits.Timeout = nil
	}
	marker := truncationMarker(outputLimit)

	// One stream, flooded without newlines: what comes before the marker
	// is exactly the first bytes the command wrote.
	s := run(t, probeStart(tty, pol, nil, "spew", "1048576", "write", w+"/after"), nil)
	if refusedAsAllowed(t, c, s) {
		return
	}
	exitedCleanly(t, s)
	checkMechanismSet(t, s.res.Enforcement.GetMechanismSet())
	unchanged(t, w+"/after", payload)
	stdout, stderr := s.stdout, s.stderr
	if tty {
		// The daemon's marker may have passed through the terminal's
		// newline translation; the flood has no newline to translate.
		stdout, stderr = strings.ReplaceAll(stdout, "\r\n", "\n"), strings.ReplaceAll(stderr, "\r\n", "\n")
	}
	flood := strings.Repeat("x", outputLimit)
	switch {
	case strings.Count(stdout+stderr, marker) != 1:
		t.Errorf("want the marker %q exactly once; got %d bytes of stdout ending %q, stderr %q",
			marker, len(stdout), tail(stdout), tail(stderr))
	case strings.Contains(stdout, marker) && (stdout != flood+marker || stderr != ""):
		t.Errorf("stdout must be the first %d bytes written, then the marker: got %d bytes ending %q; stderr %q",
			outputLimit, len(stdout), tail(stdout), tail(stderr))
	case strings.Contains(stderr, marker) && (stdout != flood || stderr != marker):
		t.Errorf("stdout must be the first %d bytes written, stderr the marker: got %d bytes ending %q; stderr %q",
			outputLimit, len(stdout), tail(stdout), tail(stderr))
	}
	enforcedBy(t, s, "limits.output_bytes")
	want := denialWant{field: "limits.output_bytes", operation: "write"}
	recordedDenials(t, s.res.SessionID, want)
	auditedDenial(t, s.res.SessionID, want)

	// Two streams: 60000 bytes to stderr (and the probe's line), then
	// 60000 to stdout. Counted apart, neither would reach the cap.
	script := fmt.Sprintf(`%[1]s spew 60000 >&2 && %[1]s spew 60000 && %[1]s write %[2]s/after-both`, suite.probe, w)
	both := run(t, commandStart(tty, pol, nil, "/bin/sh", "-c", script), nil)
	exitedCleanly(t, both)
	unchanged(t, w+"/after-both", payload)
	out := both.stdout + both.stderr
	n := strings.Count(out, marker)
	if tty {
		n += strings.Count(out, strings.ReplaceAll(marker, "\n", "\r\n"))
	}
	if n != 1 {
		t.Fatalf("stdout and stderr together: want the marker once, got it %d times; %d bytes ending %q", n, len(out), tail(out))
	}
	// The bytes the command wrote, as the session carries them (on the
	// PTY path after the terminal's translation): the marker aside,
	// exactly the cap.
	delivered := len(out) - len(marker)
	if tty && !strings.Contains(out, marker) {
		delivered = len(out) - len(strings.ReplaceAll(marker, "\n", "\r\n"))
	}
	if delivered != outputLimit {
		t.Errorf("stdout and stderr together carried %d bytes besides the marker, want the cap, %d (stdout %d, stderr %d bytes)",
			delivered, outputLimit, len(both.stdout), len(both.stderr))
	}
}
