package vterm

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// prompt is what an interactive shell prints before it waits: a title,
// bracketed paste on, a coloured prompt.
const prompt = "\x1b]0;user@host: ~\x07\x1b[?2004h\x1b[01;32muser@host\x1b[00m:\x1b[01;34m~\x1b[00m$ "

// A terminal session that printed a prompt and waits costs the daemon less
// than a byte per cell of its screen: it has no emulator (which costs more
// than 200 bytes per cell) until one is needed.
func TestScreenThatPrintedAPromptIsSmall(t *testing.T) {
	const n, rows, cols = 200, 24, 80
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	screens := make([]*Screen, n)
	for i := range screens {
		screens[i] = NewScreen(rows, cols, func([]byte) {})
		screens[i].Feed([]byte(fmt.Sprintf("session %d\r\n", i)))
		screens[i].Feed([]byte(prompt))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n; per >= rows*cols {
		t.Errorf("a screen that printed a prompt holds %d bytes of heap, want less than %d (a byte per cell)", per, rows*cols)
	}
	if got, want := screens[7].Snapshot().Text(), "session 7\nuser@host:~$\n"; got != want {
		t.Errorf("screen text %q, want %q", got, want)
	}
	for _, s := range screens {
		s.Close()
	}
}

// step is one thing a screen is told: output, or a resize when out is
// empty.
type step struct {
	out        string
	rows, cols int
}

// A prompt that marks itself for the terminal, as shells with shell
// integration and systemd's run0 do, is recorded like any other.
func TestScreenRecordsAPromptWithShellIntegrationMarks(t *testing.T) {
	for _, marked := range []string{
		"\x1b]133;D;0\x07\x1b]133;A\x07" + prompt + "\x1b]133;B\x07",
		"\x1b]633;D;0\x07\x1b]633;P;Cwd=/home/user\x07\x1b]633;A\x07" + prompt + "\x1b]633;B\x07\x1b]633;E;ls -la;nonce\x07\x1b]633;C\x07",
		"\x1b]3008;start=0ea1b5f2-7a34-4c1e-9b0d-3f5c2d1e8a77;type=shell;user=user;hostname=host\x1b\\" + prompt,
	} {
		s := NewScreen(24, 80, nil)
		s.Feed([]byte(marked))
		if started(s) {
			t.Errorf("%q started the emulator", marked)
		}
		if got, want := s.Snapshot().Text(), "user@host:~$\n"; got != want {
			t.Errorf("%q shows %q, want %q", marked, got, want)
		}
		s.Close()
	}
}

// A write the record cannot keep for its size goes to the emulator
// unscanned: up to the backlog's 64 KiB would be parsed twice.
func TestRecordDoesNotScanAWritePastItsBudget(t *testing.T) {
	r := newRecord(24, 80)
	if r.add([]byte(strings.Repeat("x", recordBudget) + "\x1b[6n")) {
		t.Fatal("the record kept a write past its budget")
	}
	if r.needed {
		t.Error("the record scanned a write past its budget")
	}
}

// What a screen shows does not depend on when its emulator started: from
// the first output (a query first), after some output (a query later, or
// more output than is recorded), or never (a snapshot of the record). The
// writes stay apart: a combining mark in a write of its own is not joined
// to the letter before it.
func TestScreenShowsTheSameWhenEverItsEmulatorStarted(t *testing.T) {
	scripts := map[string][]step{
		"prompt and lines": {{out: prompt}, {out: "ls\r\n"}, {out: "a  b  c\r\n"}, {out: prompt}},
		"writes apart":     {{out: "e"}, {out: "\u0301x"}, {out: "\U0001F1E9"}, {out: "\U0001F1EA|"}},
		"resized between": {
			{out: strings.Repeat("0123456789", 9)}, {rows: 10, cols: 40}, {out: "\r\nafter\x1b[3;5Hhere"},
			{rows: 5, cols: 100}, {rows: 6, cols: 30}, {out: "\x1b]2;title\x1b\\end"},
		},
		"alternate screen": {{out: "main\r\n"}, {out: "\x1b[?1049h\x1b[?25l\x1b[2J\x1b[Hfull screen"}, {rows: 12, cols: 50}},
		"resized first":    {{rows: 8, cols: 20}, {out: "wraps at twenty columns"}},
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			recorded := NewScreen(24, 80, nil)
			fromStart := NewScreen(24, 80, nil)
			fromStart.Feed([]byte("\x1b[5n"))
			midway := NewScreen(24, 80, nil)
			overBudget := NewScreen(24, 80, nil)
			for i, st := range script {
				for _, s := range []*Screen{recorded, fromStart, midway, overBudget} {
					if st.out == "" {
						s.Resize(st.rows, st.cols)
					} else {
						s.Feed([]byte(st.out))
					}
				}
				if i == len(script)/2 {
					midway.Feed([]byte("\x1b[c"))
					overBudget.Feed([]byte(strings.Repeat("\x1b[m", recordBudget/3)))
				}
			}
			want := recorded.Snapshot()
			if !started(fromStart) || !started(midway) || !started(overBudget) || started(recorded) {
				t.Fatal("the screens' emulators did not start where the test wants them to")
			}
			for which, s := range map[string]*Screen{"from the first output": fromStart, "midway": midway, "after the record's budget": overBudget} {
				if got := s.Snapshot(); !reflect.DeepEqual(got, want) {
					t.Errorf("emulator started %s:\n%+v\nrecorded:\n%+v", which, got, want)
				}
			}
			for _, s := range []*Screen{recorded, fromStart, midway, overBudget} {
				s.Close()
				if got := s.Snapshot(); !reflect.DeepEqual(got, want) {
					t.Errorf("a screen once closed:\n%+v\nbefore:\n%+v", got, want)
				}
			}
		})
	}
}

// Resizes are recorded one by one, as far as the budget goes; past it the
// emulator starts, and the screen shows what it would have.
func TestScreenResizedBeyondTheRecordStartsTheEmulator(t *testing.T) {
	recorded := NewScreen(24, 80, nil)
	fromStart := NewScreen(24, 80, nil)
	fromStart.Feed([]byte("\x1b[5n"))
	for _, s := range []*Screen{recorded, fromStart} {
		s.Feed([]byte(strings.Repeat("a line of text\r\n", 20)))
		for i := range recordBudget / 24 {
			s.Resize(10+i%7, 20+i%13)
		}
		s.Feed([]byte("end"))
	}
	if !started(recorded) {
		t.Error("the emulator did not start past the record's budget")
	}
	if got, want := recorded.Snapshot(), fromStart.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("resized past the budget:\n%+v\nwith the emulator from the start:\n%+v", got, want)
	}
	recorded.Close()
	fromStart.Close()
}

// started says whether s's emulator runs or is about to.
func started(s *Screen) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Whatever the terminal answers is answered, once, when it comes first,
// after a recorded prompt, and when it comes in pieces.
func TestRecordingScreenAnswersEveryQuery(t *testing.T) {
	queries := []struct{ query, answer, afterPrompt string }{
		{query: "\x1b[c", answer: "\x1b[?62;1;6;22c"},
		{query: "\x1b[>c", answer: "\x1b[>1;10;0c"},
		{query: "\x1b[5n", answer: "\x1b[0n"},
		{query: "\x1b[6n", answer: "\x1b[1;1R", afterPrompt: "\x1b[1;14R"},
		{query: "\x1b[?6n", answer: "\x1b[?1;1R", afterPrompt: "\x1b[?1;14R"},
		{query: "\x1b[?25$p", answer: "\x1b[?25;1$y"},
		{query: "\x1b[4$p", answer: "\x1b[4;0$y"},
		{query: "\x1b[?2048h", answer: "\x1b[48;24;80;0;0t"},
		{query: "\x1b]10;?\x1b\\", answer: "\x1b]10;rgb:ffff/ffff/ffff\a"},
		{query: "\x1b]11;?\x07", answer: "\x1b]11;rgb:0000/0000/0000\a"},
		{query: "\x1b]12;?\x07", answer: "\x1b]12;rgb:ffff/ffff/ffff\a"},
		{query: "\x1b]4;1;?\x1b\\", answer: "\x1b]4;1;rgb:8080/0000/0000\x1b\\"},
		{query: "\x1b[>q", answer: "\x1bP>|" + terminalName + "\x1b\\"},
		{query: "\x1b[?u", answer: "\x1b[?0u"},
	}
	for _, q := range queries {
		for _, before := range []string{"", prompt} {
			want := q.answer
			if before != "" && q.afterPrompt != "" {
				want = q.afterPrompt
			}
			for _, split := range []int{0, 1, len(q.query) - 1} {
				a := newAnswers()
				s := NewScreen(24, 80, a.add)
				if before != "" {
					s.Feed([]byte(before))
				}
				if split > 0 {
					s.Feed([]byte(q.query[:split]))
				}
				s.Feed([]byte(q.query[split:]))
				a.waitFor(t, want)
				s.Close()
				if got := a.String(); got != want {
					t.Errorf("%q after %q, split at %d: answers %q, want %q", q.query, before, split, got, want)
				}
			}
		}
	}
}

// What was recorded is never answered: the emulator starting later (here
// on the record's budget) replays a prompt (title, working directory,
// keypad and cursor modes) whose answers, minutes late, would land in the
// program's input. The query that follows is the only one answered.
func TestRecordedOutputIsNotAnsweredWhenTheEmulatorStarts(t *testing.T) {
	a := newAnswers()
	s := NewScreen(24, 80, a.add)
	s.Feed([]byte("\x1b]7;file://host/home/user\x07\x1b[?1h\x1b=\x1b[2 q\x1b[?25h" + prompt))
	s.Feed([]byte(strings.Repeat("a quiet line\r\n", recordBudget/14+1)))
	if !started(s) {
		t.Fatal("the emulator did not start past the record's budget")
	}
	s.Feed([]byte("\x1b[5n"))
	a.waitFor(t, "\x1b[0n")
	s.Close()
	if got := a.String(); got != "\x1b[0n" {
		t.Errorf("answers %q, want only the query's \"\\x1b[0n\"", got)
	}
}

// A screen that only records is read again and again by callers waiting for
// a prompt: reading it while nothing changed costs its lines, not an
// emulator replaying the record (about 4.8 MB and 470 allocations), and
// what is written or resized after a read is on the next.
func TestRecordingScreenReadAgainCostsItsLines(t *testing.T) {
	s := NewScreen(24, 80, nil)
	defer s.Close()
	s.Feed([]byte("session\r\n"))
	s.Feed([]byte(prompt))
	first := s.Snapshot()
	var before, after runtime.MemStats
	const reads = 20
	runtime.ReadMemStats(&before)
	for range reads {
		if got := s.Snapshot(); !reflect.DeepEqual(got, first) {
			t.Fatalf("read again:\n%+v\nfirst:\n%+v", got, first)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 4<<10 {
		t.Errorf("a screen read again allocates %d bytes, want at most 4 KiB", per)
	}
	if allocs := testing.AllocsPerRun(reads, func() { s.Snapshot() }); allocs > 2 {
		t.Errorf("a screen read again allocates %v times, want at most 2", allocs)
	}
	s.Feed([]byte("ls\r\n"))
	if got, want := s.Snapshot().Text(), "session\nuser@host:~$ ls\n"; got != want {
		t.Errorf("after a write: %q, want %q", got, want)
	}
	s.Resize(10, 20)
	if got := s.Snapshot(); got.Rows != 10 || got.Cols != 20 {
		t.Errorf("after a resize: %dx%d, want 10x20", got.Rows, got.Cols)
	}
	if started(s) {
		t.Error("the emulator started")
	}
}

func BenchmarkRecordingScreenSnapshot(b *testing.B) {
	s := NewScreen(24, 80, nil)
	defer s.Close()
	s.Feed([]byte(prompt))
	b.ReportAllocs()
	for b.Loop() {
		s.Snapshot()
	}
}
