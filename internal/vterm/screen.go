// Package vterm follows a terminal session's output with a virtual
// terminal: what the screen shows, for Inspect and sandboxctl screen, and
// the answers a terminal gives to the queries programs send it, for the
// daemon to give while no client's terminal is attached. It is apart from
// package pty, which the backends link, so that what links a backend (the
// CLI's export-oci does) does not link a terminal emulator with it.
package vterm

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// screenBacklog is how much output the screen may be behind before it skips
// ahead to the newest. The emulator follows a few MB/s: a terminal session
// printing faster would otherwise have it take a core, or hold its output
// back. 64 KiB is more than any screen can show.
const screenBacklog = 64 << 10

// skipPause is how long the screen lets output pile up after it had to skip
// some: with the backlog's bound, at most about a sixth of a core goes to a
// session printing flat out.
const skipPause = 100 * time.Millisecond

// can is the control character that abandons an escape sequence in
// progress: fed after a skip, so that half a sequence cut off by it does not
// swallow what follows.
const can = 0x18

// terminalName is what the screen answers XTVERSION with.
const terminalName = "sandboxd"

// Screen is a virtual terminal that follows a session's output: what the
// program has drawn, where its cursor is, and the answers a terminal gives
// to the queries programs send it (device attributes, cursor position,
// colours, version, keyboard protocol). The escape sequences are parsed by
// github.com/charmbracelet/x/vt.
//
// Feed never blocks. Until the program sends something the terminal would
// answer, or prints more than a few KiB, the screen only records the output
// (see record): a terminal session that prints a prompt and waits costs
// about a KiB, not an emulator. From then on Feed costs the output path only
// an append, and the emulator runs on its own goroutine.
type Screen struct {
	answer func([]byte)

	mu      sync.Mutex
	pending [][]byte
	size    int
	skipped bool
	// rec is the output before the emulator started; nil once the emulator
	// has replayed it, or the screen is closed.
	rec     *record
	started bool
	closed  bool
	wake    chan struct{}
	done    chan struct{}

	emu        sync.Mutex // held while the emulator runs
	e          *vt.Emulator
	rows, cols int
	title      string
	// final is what the screen showed when it was closed: an ended
	// session's screen keeps that, not the emulator (see Close).
	final *Snapshot
}

// NewScreen returns a screen of rows by cols. answer gets the terminal's
// replies to the program's queries, in order; it is called from the
// screen's own goroutine and must not block for long.
func NewScreen(rows, cols int, answer func([]byte)) *Screen {
	if rows <= 0 {
		rows = 24
	}
	if cols <= 0 {
		cols = 80
	}
	return &Screen{answer: answer, rows: rows, cols: cols, rec: newRecord(rows, cols), wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Feed hands the screen output the program wrote. p must not be changed
// afterwards.
func (s *Screen) Feed(p []byte) {
	if len(p) == 0 {
		return
	}
	s.mu.Lock()
	if s.closed || !s.started && s.rec.add(p) {
		s.mu.Unlock()
		return
	}
	s.pending = append(s.pending, p)
	s.size += len(p)
	for s.size > screenBacklog && len(s.pending) > 1 {
		s.size -= len(s.pending[0])
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.skipped = true
	}
	if s.size > screenBacklog && s.started {
		// One read longer than the backlog (the daemon reads up to 128
		// KiB): only its end can be on the screen. The read that starts
		// the emulator is taken whole, so that a large first frame keeps
		// the modes it sets at its start (the alternate screen, colours).
		s.pending[0] = s.pending[0][s.size-screenBacklog:]
		s.size, s.skipped = screenBacklog, true
	}
	start := !s.started
	s.started = true
	s.mu.Unlock()
	if start {
		go s.run()
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// emulatorLocked returns the emulator, starting it on the record if the
// output needs it and it has not started; nil while the screen only
// records. s.emu is held.
func (s *Screen) emulatorLocked() *vt.Emulator {
	if s.e != nil {
		return s.e
	}
	s.mu.Lock()
	var rec *record
	if s.started {
		rec, s.rec = s.rec, nil
	}
	s.mu.Unlock()
	if rec == nil {
		return nil
	}
	s.e = newEmulator(rec.rows, rec.cols, &s.title)
	go s.relayAnswers(s.e)
	rec.replay(s.e)
	return s.e
}

// newEmulator returns an emulator of rows by cols that sets *title.
func newEmulator(rows, cols int, title *string) *vt.Emulator {
	e := vt.NewEmulator(cols, rows)
	// The session's scrollback is kept elsewhere; one line is the least the
	// emulator takes, and each one it keeps is a copy per line scrolled.
	e.SetScrollbackSize(1)
	e.SetCallbacks(vt.Callbacks{Title: func(t string) { *title = t }})
	in := e.InputPipe()
	e.RegisterCsiHandler(ansi.Command('>', 0, 'q'), func(params ansi.Params) bool {
		if n, _, _ := params.Param(0, 0); n != 0 {
			return false
		}
		_, _ = io.WriteString(in, "\x1bP>|"+terminalName+"\x1b\\")
		return true
	})
	// The library answers the operating status in DEC's private form
	// (CSI ? 0 n), which programs asking CSI 5 n do not expect.
	e.RegisterCsiHandler('n', func(params ansi.Params) bool {
		if n, _, _ := params.Param(0, 0); n != 5 {
			return false
		}
		_, _ = io.WriteString(in, "\x1b[0n")
		return true
	})
	// The keyboard protocol is known and no enhancement is in force: keys
	// reach the program as the attached client's terminal sends them.
	e.RegisterCsiHandler(ansi.Command('?', 0, 'u'), func(ansi.Params) bool {
		_, _ = io.WriteString(in, "\x1b[?0u")
		return true
	})
	e.RegisterCsiHandler(ansi.Command('>', 0, 'u'), func(ansi.Params) bool { return true })
	e.RegisterCsiHandler(ansi.Command('<', 0, 'u'), func(ansi.Params) bool { return true })
	e.RegisterCsiHandler(ansi.Command('=', 0, 'u'), func(ansi.Params) bool { return true })
	e.RegisterOscHandler(4, func(data []byte) bool { return answerPalette(e, in, data) })
	return e
}

// answerPalette answers the queries of an OSC 4 sequence ("4;INDEX;?",
// possibly several pairs) with the palette's colours and sets the others.
func answerPalette(e *vt.Emulator, in io.Writer, data []byte) bool {
	parts := bytes.Split(data, []byte{';'})
	for i := 1; i+1 < len(parts); i += 2 {
		idx, err := strconv.Atoi(string(parts[i]))
		if err != nil || idx < 0 || idx > 255 {
			continue
		}
		if string(parts[i+1]) == "?" {
			if c := e.IndexedColor(idx); c != nil {
				_, _ = fmt.Fprintf(in, "\x1b]4;%d;%s\x1b\\", idx, ansi.XRGBColor{Color: c}.String())
			}
			continue
		}
		if c := ansi.XParseColor(string(parts[i+1])); c != nil {
			e.SetIndexedColor(idx, c)
		}
	}
	return true
}

// relayAnswers passes what the emulator answers on to answer until the
// emulator is closed. The emulator's answers go through a pipe that holds
// nothing, so they must be read as they come.
func (s *Screen) relayAnswers(e *vt.Emulator) {
	buf := make([]byte, 256)
	for {
		n, err := e.Read(buf)
		if n > 0 && s.answer != nil {
			s.answer(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (s *Screen) run() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		if s.catchUp() {
			select {
			case <-s.done:
				return
			case <-time.After(skipPause):
			}
		}
	}
}

// catchUp runs the emulator over the pending output and says whether some
// had to be skipped.
func (s *Screen) catchUp() bool {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.catchUpLocked()
}

// catchUpLocked is catchUp with s.emu held.
func (s *Screen) catchUpLocked() bool {
	if s.emulatorLocked() == nil {
		return false
	}
	s.mu.Lock()
	chunks, skipped := s.pending, s.skipped
	s.pending, s.size, s.skipped = nil, 0, false
	s.mu.Unlock()
	if skipped {
		_, _ = s.e.Write([]byte{can})
	}
	for _, c := range chunks {
		_, _ = s.e.Write(c)
	}
	return skipped
}

// Resize changes the screen's size, as the terminal's was.
func (s *Screen) Resize(rows, cols int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	s.emu.Lock()
	defer s.emu.Unlock()
	s.rows, s.cols = rows, cols
	s.mu.Lock()
	start := !s.started && s.rec != nil && !s.rec.resize(rows, cols)
	s.started = s.started || start
	s.mu.Unlock()
	if start {
		go s.run()
	}
	if e := s.emulatorLocked(); e != nil {
		// What was written before the resize is drawn at the old size,
		// as a terminal would, not at the new one.
		s.catchUpLocked()
		e.Resize(cols, rows)
	}
}

// Close stops the screen; its last content stays readable. The emulator
// and the record go: an ended session is kept for a day, and its emulator
// would keep two screens of cells and the 4 MiB its parser allocates for
// escape sequences, where the last content is a few lines of text.
func (s *Screen) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	// What was fed before the close is on the last content.
	s.catchUp()
	s.emu.Lock()
	defer s.emu.Unlock()
	if s.e == nil {
		s.mu.Lock()
		rec := s.rec
		s.rec = nil
		s.mu.Unlock()
		if rec != nil && !rec.empty() {
			s.final = rec.view().shown
			if s.final == nil {
				sn := recordedSnapshot(rec)
				s.final = &sn
			}
		}
		return
	}
	sn := snapshotOf(s.e, s.title)
	s.final = &sn
	// Closing the pipe of answers ends relayAnswers. Not e.Close: it sets a
	// flag that e.Read, under way in relayAnswers, reads without a lock.
	if c, ok := s.e.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
	s.e = nil
}

// Snapshot is what a screen shows at one moment.
type Snapshot struct {
	Rows, Cols int
	// Lines are the screen's rows, top first, without trailing blanks.
	Lines []string
	// CursorRow and CursorCol count from 0.
	CursorRow, CursorCol int
	CursorVisible        bool
	// AltScreen is set while the program draws on the alternate screen,
	// as full-screen programs do.
	AltScreen bool
	Title     string
}

// Text is the screen as text: its lines without trailing blank lines.
func (sn Snapshot) Text() string {
	end := len(sn.Lines)
	for end > 0 && sn.Lines[end-1] == "" {
		end--
	}
	if end == 0 {
		return ""
	}
	return strings.Join(sn.Lines[:end], "\n") + "\n"
}

// Snapshot returns what the screen shows now, once the output fed so far
// has been run through the emulator.
func (s *Screen) Snapshot() Snapshot {
	s.catchUp()
	s.emu.Lock()
	defer s.emu.Unlock()
	if s.final != nil {
		sn := *s.final
		sn.Lines = slices.Clone(sn.Lines)
		return sn
	}
	if s.e != nil {
		return snapshotOf(s.e, s.title)
	}
	s.mu.Lock()
	var rec record
	if s.rec != nil {
		rec = s.rec.view()
	}
	s.mu.Unlock()
	if rec.empty() {
		return Snapshot{Rows: s.rows, Cols: s.cols, Lines: make([]string, s.rows), CursorVisible: true}
	}
	sn := rec.shown
	if sn == nil {
		fresh := recordedSnapshot(&rec)
		sn = &fresh
		s.mu.Lock()
		if s.rec != nil {
			s.rec.remember(&rec, sn)
		}
		s.mu.Unlock()
	}
	out := *sn
	out.Lines = slices.Clone(sn.Lines)
	return out
}

// recordedSnapshot is what an emulator fed rec shows. The emulator is
// dropped after: a screen looked at now and then stays a record.
func recordedSnapshot(rec *record) Snapshot {
	var title string
	e := newEmulator(rec.rows, rec.cols, &title)
	// Nothing reads its answers: should it give one, the write fails
	// rather than waits.
	if c, ok := e.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
	rec.replay(e)
	return snapshotOf(e, title)
}

// snapshotOf is what e shows.
func snapshotOf(e *vt.Emulator, title string) Snapshot {
	sn := Snapshot{Rows: e.Height(), Cols: e.Width(), CursorVisible: !e.CursorHidden(), AltScreen: e.IsAltScreen(), Title: title}
	pos := e.CursorPosition()
	sn.CursorRow, sn.CursorCol = pos.Y, pos.X
	var b strings.Builder
	for y := range sn.Rows {
		b.Reset()
		for x := 0; x < sn.Cols; x++ {
			c := e.CellAt(x, y)
			switch {
			case c == nil || c.Content == "" && c.Width == 0:
				// The second column of a wide character.
			case c.Content == "":
				b.WriteByte(' ')
			default:
				b.WriteString(c.Content)
			}
		}
		sn.Lines = append(sn.Lines, strings.TrimRight(b.String(), " "))
	}
	return sn
}
