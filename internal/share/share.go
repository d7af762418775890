// Package share keeps one copy of values that many holders would
// otherwise each keep an equal copy of, for as long as some holder uses
// it: a daemon's idle sessions started under one policy hold the same
// normalized policy, enforcement report and write model, and each copy
// is part of what an idle session costs.
package share

import (
	"runtime"
	"sync"
	"weak"

	"google.golang.org/protobuf/proto"
)

// Table maps a key that spells out a value to the value in use, with a
// note derived from it once. The values are shared: nobody changes one
// once it is in the table. The zero Table is ready to use.
type Table[T any] struct {
	mu sync.Mutex
	m  map[string]slot[T]
}

type slot[T any] struct {
	wp   weak.Pointer[T]
	note string
}

// Get returns the value in use for key and its note, or the value and
// note that add makes, which it keeps for the next caller with that key
// until no one uses the value any more. Equal values must have equal
// keys, and different values different keys. Every launch asks, and most
// find the value in use: finding it copies nothing and calls nothing, so
// the key can be a reused buffer and add can do what only a value that
// is kept needs. add runs under the table's lock, so that two callers
// with a new key make one value: it must not use the table, and its cost
// holds up every other caller's Get meanwhile.
func (t *Table[T]) Get(key []byte, add func() (*T, string)) (*T, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[string(key)]; ok {
		if have := s.wp.Value(); have != nil {
			return have, s.note
		}
	}
	if t.m == nil {
		t.m = map[string]slot[T]{}
	}
	v, note := add()
	k := string(key)
	wp := weak.Make(v)
	t.m[k] = slot[T]{wp, note}
	runtime.AddCleanup(v, t.forget, entry[T]{k, wp})
	return v, note
}

type entry[T any] struct {
	key string
	wp  weak.Pointer[T]
}

// forget drops e once its value is unreachable, unless the key holds
// another value by then.
func (t *Table[T]) forget(e entry[T]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[e.key].wp == e.wp {
		delete(t.m, e.key)
	}
}

// Len is how many values the table holds, some of which may be
// unreachable already and not yet forgotten.
func (t *Table[T]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// keyBuffers hold the encodings that key messages: one is about as large
// as a policy or a report, and only a new value's key is kept.
var keyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Message is Get for a protocol buffer message, keyed by its
// deterministic encoding (unknown fields included), with note(m) as the
// note of an m that is kept (nil: no note): m itself, and note(m), when
// it cannot be encoded, which then goes unshared.
func Message[T any, M interface {
	*T
	proto.Message
}](t *Table[T], m M, note func(M) string) (M, string) {
	noteOf := func(m M) string {
		if note == nil {
			return ""
		}
		return note(m)
	}
	buf := keyBuffers.Get().(*[]byte)
	defer keyBuffers.Put(buf)
	key, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		return m, noteOf(m)
	}
	*buf = key
	v, n := t.Get(key, func() (*T, string) { return m, noteOf(m) })
	return M(v), n
}
