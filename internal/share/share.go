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

// Table maps a key that spells out a value to the value in use. The
// values are shared: nobody changes one once it is in the table. The
// zero Table is ready to use.
type Table[T any] struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[T]
}

// Get returns the value in use for key, or v, which it keeps for the
// next caller with that key until no one uses it any more. Equal values
// must have equal keys, and different values different keys.
func (t *Table[T]) Get(key string, v *T) *T {
	t.mu.Lock()
	defer t.mu.Unlock()
	if have := t.m[key].Value(); have != nil {
		return have
	}
	if t.m == nil {
		t.m = map[string]weak.Pointer[T]{}
	}
	wp := weak.Make(v)
	t.m[key] = wp
	runtime.AddCleanup(v, t.forget, entry[T]{key, wp})
	return v
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
	if t.m[e.key] == e.wp {
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

// Message is Get for a protocol buffer message, keyed by its
// deterministic encoding (unknown fields included): m itself when it
// cannot be encoded, which then goes unshared.
func Message[T any, M interface {
	*T
	proto.Message
}](t *Table[T], m M) M {
	key, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return m
	}
	return t.Get(string(key), m)
}
