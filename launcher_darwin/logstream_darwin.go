//go:build darwin

package launcherdarwin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const (
	logToolPath = "/usr/bin/log"
	// logPredicate selects what can be a report of one of this package's
	// profiles; ParseViolation decides what is.
	logPredicate = `eventMessage CONTAINS "` + TagPrefix + `"`
	// logReadyTimeout bounds how long the first session waits for the
	// stream to attach, so that its first refusals are not lost.
	logReadyTimeout = 5 * time.Second
	// logMaxRecord bounds a record; a Seatbelt report is far shorter, and
	// a longer record is skipped.
	logMaxRecord  = 256 << 10
	logMinBackoff = time.Second
	logMaxBackoff = time.Minute
)

// logStream follows the unified log with one `log stream` child for every
// session of the backend, and hands each violation to the session its tag
// names. The child stays in the daemon's process group, so that launchd,
// which kills a job's process group when the job ends, or the terminal the
// daemon runs in, ends it with the daemon.
type logStream struct {
	// tool is the probe of the log tool; the stream is never started
	// without it.
	tool ProbeResult

	mu       sync.Mutex
	sessions map[string]*logWatch
	started  bool
	// live is true while a child is attached; down says why not otherwise.
	live bool
	down string
	// settled is closed once the first child has attached or failed.
	settled chan struct{}
}

type logWatch struct {
	plan     *Plan
	onDenial func(*sandboxdv1.Denial)
}

func newLogStream(tool ProbeResult) *logStream {
	return &logStream{tool: tool, sessions: map[string]*logWatch{}, settled: make(chan struct{})}
}

// register routes the violations tagged with session to onDenial, starting
// the stream if this is its first session, and returns the denial sources
// of the session's report. release ends the routing after grace.
func (l *logStream) register(ctx context.Context, session string, plan *Plan, onDenial func(*sandboxdv1.Denial)) (sources []*sandboxdv1.DenialSource, release func(grace time.Duration)) {
	if !l.tool.OK {
		return unobserved(l.tool.Op + ": " + l.tool.Detail), func(time.Duration) {}
	}
	w := &logWatch{plan: plan, onDenial: onDenial}
	l.mu.Lock()
	if onDenial != nil {
		l.sessions[session] = w
	}
	if !l.started {
		l.started = true
		go l.run()
	}
	l.mu.Unlock()
	release = func(grace time.Duration) {
		time.AfterFunc(grace, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.sessions[session] == w {
				delete(l.sessions, session)
			}
		})
	}

	t := time.NewTimer(logReadyTimeout)
	defer t.Stop()
	select {
	case <-l.settled:
	case <-t.C:
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.live:
		return DenialSources(), release
	case l.down != "":
		return unobserved(l.down), release
	}
	return unobserved(fmt.Sprintf("%s stream did not attach within %v", logToolPath, logReadyTimeout)), release
}

// state is the stream's health for the capabilities report.
func (l *logStream) state() (ok bool, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.started:
		return true, "present; the stream starts with the first session"
	case l.live:
		return true, "streaming"
	case l.down != "":
		return false, l.down
	}
	return true, "starting"
}

func unobserved(why string) []*sandboxdv1.DenialSource {
	out := DenialSources()
	for _, s := range out {
		s.Observed = false
		s.How = "not observed: the unified log cannot be read: " + why
	}
	return out
}

// run keeps a child following the log for the rest of the daemon's life,
// restarting it when it ends, more slowly while it keeps failing.
func (l *logStream) run() {
	backoff := logMinBackoff
	for {
		began := time.Now()
		err := l.follow()
		l.mu.Lock()
		l.live, l.down = false, err.Error()
		l.settle()
		l.mu.Unlock()
		if time.Since(began) > logMaxBackoff {
			backoff = logMinBackoff
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, logMaxBackoff)
	}
}

// settle marks the first attempt's outcome; l.mu is held.
func (l *logStream) settle() {
	select {
	case <-l.settled:
	default:
		close(l.settled)
	}
}

// follow runs one child until it ends and says why it did.
func (l *logStream) follow() error {
	cmd := exec.Command(logToolPath, "stream", "--style", "ndjson", "--predicate", logPredicate)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("%s stream: %w", logToolPath, err)
	}
	stderr := &tailBuffer{max: 2048}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s stream: %w", logToolPath, err)
	}
	r := bufio.NewReaderSize(out, logMaxRecord)
	attached := false
	var readErr error
	for {
		line, err := readRecord(r)
		if err != nil {
			readErr = err
			break
		}
		// The first line is the header `log` prints once it follows the
		// log.
		if !attached {
			attached = true
			l.mu.Lock()
			l.live, l.down = true, ""
			l.settle()
			l.mu.Unlock()
		}
		l.dispatch(line)
	}
	cmd.Process.Kill()
	werr := cmd.Wait()
	msg := strings.TrimSpace(stderr.String())
	if msg == "" {
		msg = "no output on stderr"
	}
	return fmt.Errorf("%s stream ended (%v; read: %v): %s", logToolPath, werr, readErr, msg)
}

// readRecord returns the next line, skipping lines too long to be a
// Seatbelt report.
func readRecord(r *bufio.Reader) ([]byte, error) {
	for {
		line, err := r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil {
			return nil, err
		}
	}
}

func (l *logStream) dispatch(line []byte) {
	v, ok := ParseViolation(line)
	if !ok {
		return
	}
	l.mu.Lock()
	w := l.sessions[v.Session]
	l.mu.Unlock()
	if w != nil {
		w.onDenial(v.Denial(w.plan))
	}
}

// tailBuffer keeps the last max bytes written to it: the end of a failing
// tool's stderr says why it failed.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
