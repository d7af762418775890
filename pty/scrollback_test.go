package pty

import (
	"bytes"
	"sync"
	"testing"
)

func TestScrollbackKeepsEverythingUnderTheLimit(t *testing.T) {
	s := NewScrollback(16)
	s.Append(1, []byte("abc"))
	s.Append(2, []byte("def"))
	got := s.Chunks()
	if len(got) != 2 || got[0].Stream != 1 || string(got[0].Data) != "abc" || got[1].Stream != 2 || string(got[1].Data) != "def" {
		t.Fatalf("Chunks() = %q", got)
	}
	if s.Dropped() != 0 {
		t.Fatalf("Dropped() = %d, want 0", s.Dropped())
	}
}

func TestScrollbackKeepsTheNewestBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writes  []string
		want    string
		chunks  int
		dropped int64
	}{
		{"exactly full", []string{"abcd"}, "abcd", 1, 0},
		{"cuts the oldest chunk", []string{"abc", "def"}, "cdef", 2, 2},
		{"drops whole chunks", []string{"ab", "cd", "e"}, "bcde", 3, 1},
		{"drops several chunks", []string{"a", "b", "c", "d", "e", "f", "g"}, "defg", 4, 3},
		{"one write larger than the limit", []string{"0123456789"}, "6789", 1, 6},
		{"large write after others", []string{"xy", "0123456789"}, "6789", 1, 8},
		{"empty write", []string{"ab", "", "c"}, "abc", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScrollback(4)
			for _, w := range tc.writes {
				s.Append(1, []byte(w))
			}
			if got := string(s.Bytes()); got != tc.want {
				t.Fatalf("Bytes() = %q, want %q", got, tc.want)
			}
			if got := len(s.Chunks()); got != tc.chunks {
				t.Fatalf("%d chunks, want %d", got, tc.chunks)
			}
			if got := s.Dropped(); got != tc.dropped {
				t.Fatalf("Dropped() = %d, want %d", got, tc.dropped)
			}
		})
	}
}

func TestScrollbackCopiesWhatItIsGiven(t *testing.T) {
	s := NewScrollback(8)
	p := []byte("abc")
	s.Append(1, p)
	p[0] = 'X'
	b := s.Bytes()
	b[1] = 'Y'
	if got := string(s.Bytes()); got != "abc" {
		t.Fatalf("changing the caller's slices changed the scrollback: %q", got)
	}
}

func TestScrollbackTakesNoMemoryUntilOutput(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { NewScrollback(1 << 20) })
	if allocs > 1 {
		t.Fatalf("NewScrollback allocates %v times; the buffer must grow with output", allocs)
	}
	s := NewScrollback(1 << 20)
	if cap(s.Bytes()) != 0 {
		t.Fatalf("an empty scrollback holds %d bytes", cap(s.Bytes()))
	}
}

func TestScrollbackConcurrentWriters(t *testing.T) {
	s := NewScrollback(1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Append(1, []byte("0123456789"))
			}
		})
	}
	wg.Wait()
	if want := bytes.Repeat([]byte("0123456789"), 100); !bytes.Equal(s.Bytes(), want) {
		t.Fatalf("after concurrent writes of whole chunks the buffer is not made of whole chunks")
	}
}

// The end of a write larger than the limit is kept on its own, not as a
// part of the write, which it would keep in memory whole.
func TestScrollbackKeepsNoMoreOfALargeWriteThanTheLimit(t *testing.T) {
	s := NewScrollback(1 << 10)
	p := bytes.Repeat([]byte("x"), 128<<10)
	s.AppendOwned(1, p)
	got := s.Chunks()
	if len(got) != 1 || len(got[0].Data) != 1<<10 {
		t.Fatalf("Chunks() = %q, want one chunk of %d bytes", got, 1<<10)
	}
	if &got[0].Data[0] == &p[len(p)-len(got[0].Data)] {
		t.Error("the kept end of a write larger than the limit is a part of the write")
	}
}
