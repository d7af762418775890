package vterm

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// answers collects what a screen answers, for a test to wait on.
type answers struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
}

func newAnswers() *answers {
	a := &answers{}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *answers) add(p []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf.Write(p)
	a.cond.Broadcast()
}

// answerWait is how long a test waits for an answer before it fails.
const answerWait = 10 * time.Second

// waitFor waits until every one of want has been answered, in order, and
// fails the test if that takes longer than answerWait.
func (a *answers) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(answerWait)
	wake := time.AfterFunc(answerWait, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.cond.Broadcast()
	})
	defer wake.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for !strings.Contains(a.buf.String(), want) {
		if !time.Now().Before(deadline) {
			t.Fatalf("%q was not answered within %v; answers: %q", want, answerWait, a.buf.String())
		}
		a.cond.Wait()
	}
}

// String is everything answered so far.
func (a *answers) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

func TestScreenAnswersTerminalQueries(t *testing.T) {
	a := newAnswers()
	s := NewScreen(24, 80, a.add)
	defer s.Close()
	s.Feed([]byte("hello\r\nab"))
	queries := []struct{ query, answer string }{
		{"\x1b[c", "\x1b[?62;1;6;22c"},
		{"\x1b[>c", "\x1b[>1;10;0c"},
		{"\x1b[5n", "\x1b[0n"},
		{"\x1b[6n", "\x1b[2;3R"}, // row 2, column 3: after "ab"
		{"\x1b]10;?\x1b\\", "\x1b]10;rgb:ffff/ffff/ffff"},
		{"\x1b]11;?\x07", "\x1b]11;rgb:0000/0000/0000"},
		{"\x1b]4;1;?\x1b\\", "\x1b]4;1;rgb:"},
		{"\x1b[>q", "\x1bP>|" + terminalName + "\x1b\\"},
		{"\x1b[?u", "\x1b[?0u"},
	}
	for _, q := range queries {
		s.Feed([]byte(q.query))
		a.waitFor(t, q.answer)
	}
	a.mu.Lock()
	got := a.buf.String()
	a.mu.Unlock()
	for _, q := range queries {
		if !strings.Contains(got, q.answer) {
			t.Errorf("%q was not answered with %q; answers: %q", q.query, q.answer, got)
		}
	}
}

func TestScreenSnapshot(t *testing.T) {
	s := NewScreen(5, 20, nil)
	defer s.Close()
	if got := s.Snapshot(); got.Rows != 5 || got.Cols != 20 || got.Text() != "" {
		t.Fatalf("a screen nothing was written to: %+v", got)
	}
	s.Feed([]byte("\x1b]0;the title\x07first line\r\n\x1b[31msecond\x1b[0m line\r\n\x1b[4;3Hxy"))
	got := s.Snapshot()
	if want := "first line\nsecond line\n\n  xy\n"; got.Text() != want {
		t.Errorf("text %q, want %q", got.Text(), want)
	}
	if got.CursorRow != 3 || got.CursorCol != 4 {
		t.Errorf("cursor at %d,%d, want 3,4", got.CursorRow, got.CursorCol)
	}
	if got.Title != "the title" || got.AltScreen || !got.CursorVisible {
		t.Errorf("snapshot %+v", got)
	}
	s.Feed([]byte("\x1b[?1049h\x1b[?25l\x1b[Halt"))
	got = s.Snapshot()
	if got.Text() != "alt\n" || !got.AltScreen || got.CursorVisible {
		t.Errorf("on the alternate screen: %+v", got)
	}
	s.Resize(10, 40)
	if got = s.Snapshot(); got.Rows != 10 || got.Cols != 40 || len(got.Lines) != 10 {
		t.Errorf("after a resize to 10x40: %+v", got)
	}
}

// A screen fed faster than it can follow keeps the newest output and stays
// right about what ends up on it.
func TestScreenSkipsAheadOfABacklog(t *testing.T) {
	s := NewScreen(3, 20, nil)
	defer s.Close()
	line := []byte("0123456789abcdef\r\n")
	for range 4 * screenBacklog / len(line) {
		s.Feed(line)
	}
	s.Feed([]byte("\x1b[2J\x1b[Hlast"))
	if got := s.Snapshot().Text(); got != "last\n" {
		t.Errorf("after a flood and a clear: %q", got)
	}
}

// Output fed in one piece longer than the backlog is cut to the backlog's
// length, its end: the emulator follows no more of a flood than that.
func TestScreenCutsAPieceLongerThanTheBacklog(t *testing.T) {
	s := NewScreen(3, 20, nil)
	defer s.Close()
	big := bytes.Repeat([]byte("0123456789abcdef\r\n"), 4*screenBacklog/18)
	copy(big[len(big)-6:], "\r\nlast")
	// The emulator waits for s.emu: what Feed left is still pending, and
	// the piece comes while it is behind.
	s.emu.Lock()
	s.Feed(bytes.Repeat([]byte("behind\r\n"), 9<<10/8))
	s.Feed(big)
	s.mu.Lock()
	size, skipped, pending := s.size, s.skipped, slices.Concat(s.pending...)
	s.mu.Unlock()
	s.emu.Unlock()
	if size > screenBacklog || len(pending) != size || !skipped || !bytes.HasSuffix(pending, []byte("last")) {
		t.Errorf("pending %d bytes (size %d, skipped %v) ending %q; want at most %d, the piece's end", len(pending), size, skipped, pending[max(0, len(pending)-8):], screenBacklog)
	}
	if got := s.Snapshot().Text(); !strings.HasSuffix(got, "last\n") {
		t.Errorf("after the piece: %q", got)
	}
}

// A read longer than the backlog that starts the emulator is taken whole:
// a full-screen program's first frame sets the alternate screen at its
// start.
func TestScreenTakesALongReadWholeWhenIdle(t *testing.T) {
	s := NewScreen(3, 20, nil)
	defer s.Close()
	frame := append([]byte("\x1b[?1049h\x1b[2J"), bytes.Repeat([]byte("\x1b[1;1Hx"), 2*screenBacklog/6)...)
	s.Feed(frame)
	if sn := s.Snapshot(); !sn.AltScreen {
		t.Errorf("a %d-byte first frame that switches to the alternate screen left the screen on the main one: %q", len(frame), sn.Text())
	}
}

// A closed screen's goroutines end: a session's screen lives as long as
// the session, and a daemon holds thousands.
func TestScreenCloseEndsItsGoroutines(t *testing.T) {
	before := settledGoroutines()
	s := NewScreen(3, 20, func([]byte) {})
	s.Feed([]byte("\x1b[6n"))
	s.Snapshot()
	s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before the screen", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settledGoroutines is how many goroutines there are once the count has
// stayed the same for a while: those of the screens earlier tests closed
// end on their own time, and counted here they would hide a screen's that
// does not.
func settledGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(5 * time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// An ended session's screen is kept as long as the session is: it keeps
// what it showed, everything fed before the close included, and lets the
// emulator and its buffers go.
func TestClosedScreenKeepsItsLastContentNotTheEmulator(t *testing.T) {
	s := NewScreen(5, 20, nil)
	s.Feed([]byte("\x1b]0;done\x07first\r\nlast line"))
	s.Close()
	s.emu.Lock()
	e := s.e
	s.emu.Unlock()
	s.mu.Lock()
	rec := s.rec
	s.mu.Unlock()
	if e != nil || rec != nil {
		t.Error("a closed screen still holds its emulator or its record")
	}
	s.Feed([]byte("\r\nafter the close"))
	got := s.Snapshot()
	if want := "first\nlast line\n"; got.Text() != want || got.Title != "done" || got.CursorRow != 1 || got.CursorCol != 9 {
		t.Errorf("closed screen: text %q title %q cursor %d,%d; want %q, \"done\", 1,9", got.Text(), got.Title, got.CursorRow, got.CursorCol, want)
	}
	got.Lines[0] = "changed"
	if again := s.Snapshot(); again.Lines[0] != "first" {
		t.Errorf("a snapshot shares its lines with the screen: %q", again.Lines[0])
	}
	s.Close()
}
