package pty

import "sync"

// Chunk is one piece of recorded output and the stream it came from (for
// a pipe session, stdout or stderr; a terminal has one stream).
type Chunk struct {
	Stream int32
	Data   []byte
}

// Scrollback keeps the most recent output of a session, up to a fixed
// number of bytes, so that a client attaching later sees the session's
// recent past. Memory is taken as output arrives, not up front: most
// sessions print little, and an idle one should cost next to nothing. It is
// safe for concurrent use.
type Scrollback struct {
	mu      sync.Mutex
	limit   int
	chunks  []Chunk
	size    int
	dropped int64
}

// NewScrollback returns a Scrollback holding at most limit bytes.
func NewScrollback(limit int) *Scrollback {
	return &Scrollback{limit: max(limit, 1)}
}

// Append records a copy of p from stream, dropping the oldest bytes beyond
// the limit. A chunk is cut rather than dropped whole, so the newest
// output is always there up to the last byte the limit allows.
func (s *Scrollback) Append(stream int32, p []byte) {
	s.AppendOwned(stream, append([]byte(nil), p...))
}

// AppendOwned is Append without the copy: p is handed over and the caller
// never changes it afterwards. A session's output is copied once out of
// the read buffer and then shared by the scrollback and every viewer.
func (s *Scrollback) AppendOwned(stream int32, p []byte) {
	if len(p) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) > s.limit {
		s.dropped += int64(len(p) - s.limit)
		end := p[len(p)-s.limit:]
		if len(p) > 2*s.limit {
			// Kept as a part of p, the end would hold all of p (a whole
			// read, up to 128 KiB in the daemon, for a scrollback of any
			// size) for as long as it is kept. A copy bounds what a
			// Scrollback holds to about three times its limit. The
			// daemon's reads are less than twice its default limit, so
			// a flood copies nothing there.
			end = append([]byte(nil), end...)
		}
		p = end
	}
	s.chunks = append(s.chunks, Chunk{Stream: stream, Data: p})
	s.size += len(p)
	for s.size > s.limit {
		over := s.size - s.limit
		first := &s.chunks[0]
		if len(first.Data) <= over {
			s.size -= len(first.Data)
			s.dropped += int64(len(first.Data))
			// Cleared so the dropped data is not kept alive by the
			// backing array.
			s.chunks[0] = Chunk{}
			s.chunks = s.chunks[1:]
			continue
		}
		first.Data = first.Data[over:]
		s.size -= over
		s.dropped += int64(over)
	}
}

// Chunks returns the recorded output, oldest first. The chunks' data is
// never modified later, so callers may keep it but must not change it.
func (s *Scrollback) Chunks() []Chunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Chunk(nil), s.chunks...)
}

// Bytes returns the recorded output of every stream, oldest first.
func (s *Scrollback) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]byte, 0, s.size)
	for _, c := range s.chunks {
		out = append(out, c.Data...)
	}
	return out
}

// Dropped is how many bytes were recorded and then dropped for the limit.
func (s *Scrollback) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}
