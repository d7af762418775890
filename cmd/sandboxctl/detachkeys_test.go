package main

import (
	"errors"
	"io"
	"testing"

	"github.com/sandboxd/sandboxd/api/client"
)

func TestScanDetach(t *testing.T) {
	const p, q = "\x10", "\x11"
	for _, tc := range []struct {
		name   string
		held   int
		in     string
		out    string
		hold   int
		detach bool
	}{
		{"plain input", 0, "ls -l\r", "ls -l\r", 0, false},
		{"both keys", 0, "ls" + p + q + "dropped", "ls", 0, true},
		{"ctrl-p at the end is held", 0, "ls" + p, "ls", 1, false},
		{"ctrl-q after a held ctrl-p", 1, q + "dropped", "", 0, true},
		{"a held ctrl-p was input after all", 1, "x", p + "x", 0, false},
		{"a lone ctrl-p then another byte", 0, p + "x" + q, p + "x" + q, 0, false},
		{"ctrl-p twice then ctrl-q", 0, p + p + q, p, 0, true},
		{"a held ctrl-p then ctrl-p", 1, p, p, 1, false},
		{"ctrl-q alone", 0, q, q, 0, false},
		{"nothing read keeps what is held", 1, "", "", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, hold, detach := scanDetach(tc.held, []byte(tc.in))
			if string(out) != tc.out || hold != tc.hold || detach != tc.detach {
				t.Errorf("scanDetach(%d, %q) = %q, %d, %v; want %q, %d, %v", tc.held, tc.in, out, hold, detach, tc.out, tc.hold, tc.detach)
			}
		})
	}
}

// chunks yields one chunk per Read, then end.
type chunks struct {
	c   []string
	end error
}

func (r *chunks) Read(p []byte) (int, error) {
	if len(r.c) == 0 {
		return 0, r.end
	}
	n := copy(p, r.c[0])
	r.c = r.c[1:]
	return n, nil
}

func TestDetachReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   string
		end    error
	}{
		{"keys in separate reads", []string{"echo hi\r\x10", "\x11", "never read"}, "echo hi\r", client.ErrDetach},
		{"lone ctrl-p passes", []string{"a\x10", "b"}, "a\x10b", io.EOF},
		{"ctrl-p right before the end of input", []string{"a\x10"}, "a\x10", io.EOF},
		{"keys in one read", []string{"x\x10\x11y"}, "x", client.ErrDetach},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newDetachReader(&chunks{c: tc.chunks, end: io.EOF})
			var got []byte
			buf := make([]byte, 2) // smaller than what the reader holds
			var err error
			for err == nil {
				var n int
				n, err = r.Read(buf)
				got = append(got, buf[:n]...)
			}
			if string(got) != tc.want || !errors.Is(err, tc.end) {
				t.Errorf("read %q, %v; want %q, %v", got, err, tc.want, tc.end)
			}
		})
	}
}
