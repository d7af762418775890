package vterm

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi/parser"
	"github.com/charmbracelet/x/vt"
)

// quietCorpus is escape sequences and control characters built from their
// pieces, for the record to sort into those it keeps and those that start
// the emulator: CSI with and without prefixes, parameters and
// intermediates, every final; ESC with every final and the intermediates;
// OSC of the commands programs send, with data of several shapes and both
// terminators; C0 controls and DEL.
func quietCorpus() []string {
	var seqs []string
	params := []string{"", "0", "1", "2", "5", "6", "2;3", "25", "1049", "2004", "2048", "1;2048", "2048;1", "38;5;1"}
	for _, prefix := range []string{"", "?", ">", "<", "="} {
		for _, param := range params {
			for _, inter := range []string{"", " ", "!", "\"", "$", "'", "*"} {
				for final := byte(0x40); final <= 0x7e; final++ {
					seqs = append(seqs, "\x1b["+prefix+param+inter+string(final))
				}
			}
		}
	}
	for _, inter := range []string{"", "(", ")", "*", "+", "#", "%", " "} {
		for final := byte(0x30); final <= 0x7e; final++ {
			if strings.IndexByte("[]PX^_", final) < 0 {
				seqs = append(seqs, "\x1b"+inter+string(final))
			}
		}
	}
	cmds := []string{"0", "1", "2", "4", "7", "8", "9", "10", "11", "12", "52", "104", "110", "111", "112", "133", "633", "777", "1337", "3008", "12345678901234567890"}
	data := []string{"", ";", ";x", ";?", ";A", ";D;0", ";1;?", ";file://host/home/user", ";id=1;https://example.com", ";start=1;user=u;type=shell"}
	for _, cmd := range cmds {
		for _, d := range data {
			for _, st := range []string{"\x07", "\x1b\\"} {
				seqs = append(seqs, "\x1b]"+cmd+d+st)
			}
		}
	}
	for c := range byte(0x20) {
		if c != 0x1b {
			seqs = append(seqs, string(c))
		}
	}
	return append(seqs, "\x7f")
}

// recorded says whether a screen's record keeps pieces, written one after
// the other after a prompt, and whether they end outside any sequence.
func recorded(pieces []string) (kept, ended bool) {
	r := newRecord(24, 80)
	if !r.add([]byte(prompt)) {
		panic("the record does not keep a prompt")
	}
	for _, p := range pieces {
		if !r.add([]byte(p)) {
			return false, false
		}
	}
	return true, r.scan.State() == parser.GroundState
}

// splits is seq whole and cut in two at its first, middle and last byte.
func splits(seq string) [][]string {
	out := [][]string{{seq}}
	for _, at := range []int{1, len(seq) / 2, len(seq) - 1} {
		if at > 0 && at < len(seq) {
			out = append(out, []string{seq[:at], seq[at:]})
		}
	}
	return out
}

// answerProbe is an emulator as a screen has it, with its answers read.
type answerProbe struct {
	e    *vt.Emulator
	a    *answers
	wide bool
}

func newAnswerProbe() *answerProbe {
	var title string
	p := &answerProbe{e: newEmulator(24, 80, &title), a: newAnswers()}
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := p.e.Read(buf)
			p.a.add(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	_, _ = p.e.Write([]byte(prompt))
	return p
}

// unanswered feeds pieces and a resize, then a query, and fails the test
// if anything but the query's answer comes: what the emulator answers for
// the pieces, or for a resize after them, comes before it.
func (p *answerProbe) unanswered(t *testing.T, pieces []string) {
	t.Helper()
	for _, piece := range pieces {
		_, _ = p.e.Write([]byte(piece))
	}
	p.wide = !p.wide
	if p.wide {
		p.e.Resize(100, 30)
	} else {
		p.e.Resize(80, 24)
	}
	_, _ = p.e.Write([]byte("\x1b[5n"))
	p.a.waitFor(t, "\x1b[0n")
	p.a.mu.Lock()
	defer p.a.mu.Unlock()
	if got := p.a.buf.String(); got != "\x1b[0n" {
		t.Errorf("%q, which the record keeps, has the emulator answer %q", pieces, strings.TrimSuffix(got, "\x1b[0n"))
	}
	p.a.buf.Reset()
}

func (p *answerProbe) close() {
	if c, ok := p.e.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
}

// What the record keeps, the emulator does not answer, not even when the
// screen is resized after: the record's lists of quiet sequences hold
// against the library's handlers. The corpus has what the emulator answers
// too: the record must start the emulator for each of those.
func TestWhatTheRecordKeepsIsNotAnswered(t *testing.T) {
	p := newAnswerProbe()
	defer p.close()
	kept, fed := 0, 0
	for _, seq := range quietCorpus() {
		for _, pieces := range splits(seq) {
			fed++
			if keeps, _ := recorded(pieces); keeps {
				kept++
				p.unanswered(t, pieces)
			}
		}
	}
	t.Logf("the record kept %d of %d sequences and splits", kept, fed)
	if kept == 0 || kept == fed {
		t.Errorf("the record kept %d of %d: the corpus does not tell quiet from not", kept, fed)
	}
}

// FuzzWhatTheRecordKeepsIsNotAnswered is TestWhatTheRecordKeepsIsNotAnswered
// for any output.
func FuzzWhatTheRecordKeepsIsNotAnswered(f *testing.F) {
	for _, seed := range []string{
		"\x1b[?2004h", "\x1b[2 q", "\x1b[01;32m", "\x1b[?1049h\x1b[H\x1b[2J", "\x1b(0", "\x1b=",
		"\x1b]0;title\x07", "\x1b]7;file://host/home\x1b\\", "\x1b]8;;https://example.com\x07",
		"\x1b]133;A\x07", "\x1b]633;E;ls;n\x07", "\x1b]3008;type=shell\x1b\\",
		"\r\n\t\b", "\x1b[?1;2048h", "\x1b[6n", "\x1b]10;?\x07",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		// A sequence left open is scanned with the write that ends it,
		// as the query that follows here would end it.
		if kept, ended := recorded([]string{string(out)}); !kept || !ended {
			return
		}
		p := newAnswerProbe()
		defer p.close()
		p.unanswered(t, []string{string(out)})
	})
}
