package main

import (
	"io"

	"github.com/sandboxd/sandboxd/api/client"
)

// detachKeys is the sequence that leaves an interactive attach to a PTY
// session: ctrl-p ctrl-q, as docker's default.
var detachKeys = []byte{0x10, 0x11}

// scanDetach finds detachKeys in input that arrives in pieces. held is how
// many leading bytes of the sequence the previous piece ended with; they
// were not forwarded yet, since only what follows tells whether they are
// the sequence or input. It returns what to forward now, how many bytes it
// holds back in turn, and whether the sequence is complete, in which case
// what follows it in p is dropped. The bytes of detachKeys are distinct,
// so a mismatch never hides the start of another sequence except at the
// mismatching byte itself.
func scanDetach(held int, p []byte) (out []byte, hold int, detach bool) {
	for _, b := range p {
		if b == detachKeys[held] {
			held++
			if held == len(detachKeys) {
				return out, 0, true
			}
			continue
		}
		out = append(out, detachKeys[:held]...)
		held = 0
		if b == detachKeys[0] {
			held = 1
			continue
		}
		out = append(out, b)
	}
	return out, held, false
}

// detachReader is stdin for an interactive attach to a PTY session: it
// passes input through until the detach keys, then returns
// client.ErrDetach so the client leaves without closing the session's
// input.
type detachReader struct {
	r    io.Reader
	buf  []byte
	held int
	// out is scanned input not yet returned; end is what Read returns
	// once out is drained.
	out []byte
	end error
}

func newDetachReader(r io.Reader) *detachReader {
	return &detachReader{r: r, buf: make([]byte, 32<<10)}
}

func (d *detachReader) Read(p []byte) (int, error) {
	for len(d.out) == 0 && d.end == nil {
		n, err := d.r.Read(d.buf)
		var detach bool
		d.out, d.held, detach = scanDetach(d.held, d.buf[:n])
		switch {
		case detach:
			d.end = client.ErrDetach
		case err != nil:
			// Input that ends inside a possible sequence was input after all.
			d.out = append(d.out, detachKeys[:d.held]...)
			d.held = 0
			d.end = err
		}
	}
	if len(d.out) > 0 {
		n := copy(p, d.out)
		d.out = d.out[n:]
		return n, nil
	}
	return 0, d.end
}
