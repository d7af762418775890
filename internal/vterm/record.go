package vterm

import (
	"slices"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
	"github.com/charmbracelet/x/vt"
)

// recordBudget is how many bytes of output (and of the bookkeeping of its
// writes) a screen records before it runs its emulator. An emulator costs
// the daemon about half a MiB for a screen of 24 by 80 (two grids of cells of
// over 100 bytes each, the handlers, a 4 MiB data buffer its parser reserves);
// most terminal sessions that print no more than a prompt and a few lines
// are never looked at. Replaying the budget costs the emulator a few
// milliseconds: once when it starts, and for a snapshot of a screen that
// only records and was written to or resized since its last.
const recordBudget = 8 << 10

// oscCommandBytes is how much of an OSC string the scan keeps: enough for
// the number that names the command, which is all it looks at.
const oscCommandBytes = 16

// record is the output of a screen that has not needed its emulator yet:
// every write and resize in order, for an emulator built later (when the
// program asks the terminal something, when the output outgrows the budget,
// or for a snapshot) to end up exactly where one fed all along would be.
type record struct {
	// rows and cols are the size when the first write came.
	rows, cols int
	out        []byte
	// ends are where each write ended in out: the emulator finishes a
	// grapheme cluster at the end of a write, so the writes are replayed
	// as they came, not as one.
	ends    []int32
	resizes []resize

	// scan parses the output as the emulator's parser does, to find what
	// the emulator would answer or might act on in ways the record does
	// not know of; needed is set when it finds any.
	scan   *ansi.Parser
	needed bool

	// shown is what an emulator fed the record showed when it had
	// shownWrites writes and shownResizes resizes: the record only grows,
	// so it is what the record shows until either count changes. Callers
	// waiting for a prompt poll screens that only record.
	shown                     *Snapshot
	shownWrites, shownResizes int
}

// resize is a resize of the screen after the first writes of a record.
type resize struct {
	writes     int
	rows, cols int
}

func newRecord(rows, cols int) *record {
	r := &record{rows: rows, cols: cols}
	// Not ansi.NewParser: it allocates a 64 KiB data buffer first.
	r.scan = new(ansi.Parser)
	r.scan.SetParamsSize(parser.MaxParamsSize)
	r.scan.SetDataSize(oscCommandBytes)
	r.scan.SetHandler(ansi.Handler{
		Execute:   func(b byte) { r.need(!quietControl(b)) },
		HandleCsi: func(cmd ansi.Cmd, params ansi.Params) { r.need(!quietCsi(cmd, params)) },
		HandleEsc: func(cmd ansi.Cmd) { r.need(!quietEsc(cmd)) },
		HandleOsc: func(cmd int, data []byte) { r.need(!quietOsc(cmd, data)) },
		HandleDcs: func(ansi.Cmd, ansi.Params, []byte) { r.need(true) },
		HandleApc: func([]byte) { r.need(true) },
		HandlePm:  func([]byte) { r.need(true) },
		HandleSos: func([]byte) { r.need(true) },
	})
	return r
}

func (r *record) need(b bool) {
	r.needed = r.needed || b
}

// add records p and says whether it did; it does not when p has something
// the emulator may answer or the record would outgrow its budget: the
// emulator must run from p on.
func (r *record) add(p []byte) bool {
	if r.cost(len(p), 1, 0) > recordBudget {
		return false
	}
	// The record is done with once the emulator is needed: the rest of p
	// goes to the emulator, not the scan.
	for i := 0; i < len(p) && !r.needed; i++ {
		r.scan.Advance(p[i])
	}
	if r.needed {
		return false
	}
	r.out = append(r.out, p...)
	r.ends = append(r.ends, int32(len(r.out)))
	return true
}

// resize records a resize to rows by cols and says whether it did; it does
// not when the record would outgrow its budget. Resizes are not merged: a
// resize to fewer columns and back loses what the columns held.
func (r *record) resize(rows, cols int) bool {
	if len(r.ends) == 0 {
		r.rows, r.cols = rows, cols
		return true
	}
	if r.cost(0, 0, 1) > recordBudget {
		return false
	}
	r.resizes = append(r.resizes, resize{writes: len(r.ends), rows: rows, cols: cols})
	return true
}

// cost is the record's size with bytes, writes and resizes more.
func (r *record) cost(bytes, writes, resizes int) int {
	return len(r.out) + bytes + 4*(len(r.ends)+writes) + 24*(len(r.resizes)+resizes)
}

// view is the record as it is now, for reading while writes go on: they
// only append.
func (r *record) view() record {
	v := record{rows: r.rows, cols: r.cols, out: r.out, ends: r.ends, resizes: slices.Clone(r.resizes)}
	if r.shownWrites == len(r.ends) && r.shownResizes == len(r.resizes) {
		v.shown = r.shown
	}
	return v
}

// remember keeps sn as what the record shows at v, a view of it.
func (r *record) remember(v *record, sn *Snapshot) {
	r.shown, r.shownWrites, r.shownResizes = sn, len(v.ends), len(v.resizes)
}

// empty says whether nothing was written.
func (r *record) empty() bool {
	return len(r.ends) == 0
}

// replay writes and resizes e as the record says; e has the record's first
// size.
func (r *record) replay(e *vt.Emulator) {
	start, next := 0, 0
	for i, end := range r.ends {
		for next < len(r.resizes) && r.resizes[next].writes == i {
			e.Resize(r.resizes[next].cols, r.resizes[next].rows)
			next++
		}
		_, _ = e.Write(r.out[start:end])
		start = int(end)
	}
	for _, rs := range r.resizes[next:] {
		e.Resize(rs.cols, rs.rows)
	}
}

// quietControl says whether the emulator only moves the cursor or changes
// the character set for control character b: what a program printing
// lines sends.
func quietControl(b byte) bool {
	switch b {
	case ansi.NUL, ansi.BEL, ansi.BS, ansi.HT, ansi.LF, ansi.VT, ansi.FF, ansi.CR, ansi.SO, ansi.SI:
		return true
	}
	return false
}

// quietCsi says whether a control sequence only draws, moves the cursor or
// sets a mode (not the one that has the terminal report its size): the
// sequences prompts and line-oriented programs send. Everything else, the
// queries among it, has the emulator run.
func quietCsi(cmd ansi.Cmd, params ansi.Params) bool {
	switch {
	case cmd.Intermediate() == ' ' && cmd.Prefix() == 0:
		return cmd.Final() == 'q' // the cursor's style
	case cmd.Intermediate() != 0:
		return false
	case cmd.Prefix() == '?':
		return (cmd.Final() == 'h' || cmd.Final() == 'l') && !slices.ContainsFunc(params, func(p ansi.Param) bool {
			return p.Param(0) == int(ansi.ModeInBandResize)
		})
	case cmd.Prefix() != 0:
		return false
	}
	switch cmd.Final() {
	case '@', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'P', 'S', 'T', 'X', 'Z',
		'`', 'a', 'b', 'd', 'e', 'f', 'g', 'h', 'l', 'm', 'r':
		return true
	}
	return false
}

// quietEsc says whether an escape sequence only moves the cursor, sets the
// keypad's mode, resets the terminal or chooses a character set.
func quietEsc(cmd ansi.Cmd) bool {
	switch cmd.Intermediate() {
	case '(', ')', '*', '+':
		return true
	case 0:
		switch cmd.Final() {
		case '7', '8', '=', '>', 'D', 'E', 'H', 'M', 'c', '\\':
			return true
		}
	}
	return false
}

// quietOsc says whether an OSC string sets the title, the working directory
// or a hyperlink, or marks the parts of a shell's prompt and commands for
// the terminal (OSC 133, VS Code's 633, systemd's context 3008): common
// prompts send those, and the emulator ignores them. Its command is known
// only if the scan kept all of its digits.
func quietOsc(cmd int, data []byte) bool {
	if len(data) == oscCommandBytes && !slices.ContainsFunc(data, func(b byte) bool { return b < '0' || b > '9' }) {
		return false
	}
	switch cmd {
	case 0, 1, 2, 7, 8, 133, 633, 3008:
		return true
	}
	return false
}
