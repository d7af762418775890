package pty

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func TestScrollbackKeepsEverythingUnderCapacity(t *testing.T) {
	s := NewScrollback(16)
	fmt.Fprint(s, "abc")
	fmt.Fprint(s, "def")
	if got := string(s.Bytes()); got != "abcdef" {
		t.Fatalf("Bytes() = %q", got)
	}
}

func TestScrollbackKeepsTheNewestBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"exactly full", []string{"abcd"}, "abcd"},
		{"wraps once", []string{"abc", "def"}, "cdef"},
		{"fills to the end then wraps", []string{"ab", "cd", "e"}, "bcde"},
		{"one write larger than capacity", []string{"0123456789"}, "6789"},
		{"large write after wrap", []string{"xy", "0123456789"}, "6789"},
		{"many small writes", []string{"a", "b", "c", "d", "e", "f", "g"}, "defg"},
		{"empty write", []string{"ab", "", "c"}, "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScrollback(4)
			for _, w := range tc.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := string(s.Bytes()); got != tc.want {
				t.Fatalf("Bytes() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestScrollbackBytesIsACopy(t *testing.T) {
	s := NewScrollback(8)
	fmt.Fprint(s, "abc")
	b := s.Bytes()
	b[0] = 'X'
	if got := string(s.Bytes()); got != "abc" {
		t.Fatalf("mutating Bytes() changed the scrollback: %q", got)
	}
}

func TestScrollbackConcurrentWriters(t *testing.T) {
	s := NewScrollback(1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Write([]byte("0123456789"))
			}
		})
	}
	wg.Wait()
	if want := bytes.Repeat([]byte("0123456789"), 100); !bytes.Equal(s.Bytes(), want) {
		t.Fatalf("after concurrent writes of whole chunks the buffer is not made of whole chunks")
	}
}
