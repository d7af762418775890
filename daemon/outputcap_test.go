package daemon

import (
	"bytes"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestOutputCapKeepsTheFirstBytesThenOneMarker(t *testing.T) {
	c := &outputCap{limit: 10}
	var kept bytes.Buffer
	markers := 0
	for _, chunk := range []string{"abcd", "efgh", "ijkl", "mnop", ""} {
		keep, marker, _ := c.admit(&sandboxdv1.Output{Stream: sandboxdv1.Output_STDOUT, Data: []byte(chunk)})
		if keep != nil {
			kept.Write(keep.GetData())
		}
		if marker != nil {
			markers++
			kept.Write(marker.GetData())
		}
	}
	want := "abcdefghij" + string(c.truncationMarker(c))
	if kept.String() != want || markers != 1 {
		t.Errorf("kept %q with %d markers, want %q and one", kept.String(), markers, want)
	}
	if left, by := c.remaining(); left != 0 || by != c {
		t.Errorf("remaining %d %v", left, by)
	}
	if c.dropped != 6 {
		t.Errorf("dropped %d, want 6", c.dropped)
	}
}

// The part of a read kept at the limit does not hold the rest of the read
// in memory: the scrollback keeps it for as long as the session is kept.
func TestOutputCapKeepsNoMoreThanItKeeps(t *testing.T) {
	c := &outputCap{limit: 10}
	read := bytes.Repeat([]byte("x"), readChunk)
	keep, _, _ := c.admit(&sandboxdv1.Output{Data: read})
	if got := keep.GetData(); string(got) != "xxxxxxxxxx" || cap(got) >= len(read) {
		t.Errorf("kept %q in a buffer of %d bytes, want 10 bytes in their own", got, cap(got))
	}
}

// A chunk that ends exactly at the limit is kept whole; the marker comes
// with the first byte beyond it, so output that fits is never marked.
func TestOutputCapExactFitIsNotMarked(t *testing.T) {
	c := &outputCap{limit: 4, tty: true}
	if keep, marker, _ := c.admit(&sandboxdv1.Output{Data: []byte("abcd")}); string(keep.GetData()) != "abcd" || marker != nil {
		t.Fatalf("exact fit: %v %v", keep, marker)
	}
	keep, marker, _ := c.admit(&sandboxdv1.Output{Data: []byte("e")})
	if keep != nil || marker == nil || !bytes.HasPrefix(marker.GetData(), []byte("\r\n[sandboxd: output truncated")) {
		t.Errorf("beyond: keep %v, marker %q", keep, marker.GetData())
	}
}

func TestNoCapAdmitsEverything(t *testing.T) {
	var c *outputCap
	o := &sandboxdv1.Output{Data: []byte("x")}
	if keep, marker, _ := c.admit(o); keep != o || marker != nil {
		t.Errorf("nil cap changed output")
	}
	if _, by := c.remaining(); by != nil {
		t.Errorf("nil cap is limited")
	}
}

// A child stopped by an ancestor's limit, which its output counts
// against, is told that limit, not its own, which it has not reached.
func TestOutputCapNamesTheLimitItHit(t *testing.T) {
	root := &outputCap{limit: 100}
	parent := &outputCap{limit: 80, parent: root}
	child := &outputCap{limit: 60, parent: parent}
	if keep, _, _ := root.admit(&sandboxdv1.Output{Data: make([]byte, 50)}); len(keep.GetData()) != 50 {
		t.Fatalf("root kept %d of 50", len(keep.GetData()))
	}
	keep, marker, by := child.admit(&sandboxdv1.Output{Data: make([]byte, 55)})
	if len(keep.GetData()) != 50 || by != root {
		t.Fatalf("child kept %d of 55, stopped by %v", len(keep.GetData()), by)
	}
	for _, got := range []string{string(marker.GetData()), child.droppedDetail(by)} {
		if !strings.Contains(got, "an ancestor session") || strings.Contains(got, "root") || !strings.Contains(got, "100 bytes") || strings.Contains(got, "60") {
			t.Errorf("truncation by the root's limit says %q", got)
		}
	}
	own := &outputCap{limit: 10, parent: root}
	if _, marker, by := own.admit(&sandboxdv1.Output{Data: make([]byte, 20)}); marker == nil || by != root {
		t.Errorf("a child with 10 bytes where the root has none left: marker %q, by %v", marker.GetData(), by)
	}
	roomy := &outputCap{limit: 1000}
	small := &outputCap{limit: 10, parent: roomy}
	if _, marker, by := small.admit(&sandboxdv1.Output{Data: make([]byte, 20)}); by != small || strings.Contains(string(marker.GetData()), "ancestor") {
		t.Errorf("a child at its own limit: marker %q", marker.GetData())
	}
}
