package daemon

import (
	"bytes"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestOutputCapKeepsTheFirstBytesThenOneMarker(t *testing.T) {
	c := &outputCap{limit: 10}
	var kept bytes.Buffer
	markers := 0
	for _, chunk := range []string{"abcd", "efgh", "ijkl", "mnop", ""} {
		keep, marker := c.admit(&sandboxdv1.Output{Stream: sandboxdv1.Output_STDOUT, Data: []byte(chunk)})
		if keep != nil {
			kept.Write(keep.GetData())
		}
		if marker != nil {
			markers++
			kept.Write(marker.GetData())
		}
	}
	want := "abcdefghij" + string(truncationMarker(10, false))
	if kept.String() != want || markers != 1 {
		t.Errorf("kept %q with %d markers, want %q and one", kept.String(), markers, want)
	}
	if left, limited := c.remaining(); left != 0 || !limited {
		t.Errorf("remaining %d %v", left, limited)
	}
	if c.dropped != 6 {
		t.Errorf("dropped %d, want 6", c.dropped)
	}
}

// A chunk that ends exactly at the limit is kept whole; the marker comes
// with the first byte beyond it, so output that fits is never marked.
func TestOutputCapExactFitIsNotMarked(t *testing.T) {
	c := &outputCap{limit: 4, tty: true}
	if keep, marker := c.admit(&sandboxdv1.Output{Data: []byte("abcd")}); string(keep.GetData()) != "abcd" || marker != nil {
		t.Fatalf("exact fit: %v %v", keep, marker)
	}
	keep, marker := c.admit(&sandboxdv1.Output{Data: []byte("e")})
	if keep != nil || marker == nil || !bytes.HasPrefix(marker.GetData(), []byte("\r\n[sandboxd: output truncated")) {
		t.Errorf("beyond: keep %v, marker %q", keep, marker.GetData())
	}
}

func TestNoCapAdmitsEverything(t *testing.T) {
	var c *outputCap
	o := &sandboxdv1.Output{Data: []byte("x")}
	if keep, marker := c.admit(o); keep != o || marker != nil {
		t.Errorf("nil cap changed output")
	}
	if _, limited := c.remaining(); limited {
		t.Errorf("nil cap is limited")
	}
}
