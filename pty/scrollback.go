package pty

import "sync"

// Scrollback keeps the most recent output of a session, up to a fixed number
// of bytes, so that a client attaching later sees the screen's recent past.
// It is safe for concurrent use.
type Scrollback struct {
	mu   sync.Mutex
	buf  []byte
	next int  // where the next byte goes
	full bool // buf has wrapped at least once
}

// NewScrollback returns a Scrollback holding at most size bytes.
func NewScrollback(size int) *Scrollback {
	if size < 1 {
		size = 1
	}
	return &Scrollback{buf: make([]byte, size)}
}

// Write records p, dropping the oldest bytes beyond the capacity. It never
// fails, so it can sit in an io.MultiWriter next to the live stream.
func (s *Scrollback) Write(p []byte) (int, error) {
	n := len(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) >= len(s.buf) {
		copy(s.buf, p[len(p)-len(s.buf):])
		s.next, s.full = 0, true
		return n, nil
	}
	c := copy(s.buf[s.next:], p)
	if c < len(p) {
		copy(s.buf, p[c:])
		s.full = true
	}
	s.next = (s.next + len(p)) % len(s.buf)
	if s.next == 0 && len(p) > 0 {
		s.full = true
	}
	return n, nil
}

// Bytes returns a copy of the recorded output, oldest first.
func (s *Scrollback) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return append([]byte(nil), s.buf[:s.next]...)
	}
	out := make([]byte, 0, len(s.buf))
	out = append(out, s.buf[s.next:]...)
	return append(out, s.buf[:s.next]...)
}
