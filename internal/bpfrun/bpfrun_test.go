package bpfrun

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
)

type insn = sandboxinit.SockFilter

func TestCheck(t *testing.T) {
	allow := insn{Code: retK, K: 0x7fff0000}
	valid := []insn{{Code: ldAbsW, K: 0}, {Code: jeqK, Jt: 1, K: 7}, {Code: ja, K: 1}, {Code: retK, K: 0x00050001}, {Code: andK, K: 1}, allow}
	if err := Check(valid); err != nil {
		t.Fatalf("a valid program: %v", err)
	}
	for _, c := range []struct {
		name string
		prog []insn
		want string
	}{
		{"empty", nil, "instructions"},
		{"too long", make([]insn, 4097), "instructions"},
		{"no return at the end", []insn{allow, {Code: ldAbsW}}, "no return"},
		{"load past seccomp_data", []insn{{Code: ldAbsW, K: 64}, allow}, "offset 64"},
		{"unaligned load", []insn{{Code: ldAbsW, K: 18}, allow}, "offset 18"},
		{"jump off the end", []insn{{Code: ja, K: 1}, allow}, "off the program"},
		{"true branch off the end", []insn{{Code: jeqK, Jt: 1}, allow}, "off the program"},
		{"false branch off the end", []insn{{Code: jsetK, Jf: 2}, allow}, "off the program"},
		{"unknown code", []insn{{Code: 0x07}, allow}, "unknown code"},
		{"no action", []insn{{Code: retK, K: 0x00010000}}, "no seccomp action"},
		{"errno too large", []insn{{Code: retK, K: 0x00050000 | 4096}}, "errno 4096"},
	} {
		if err := Check(c.prog); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
