// Package mainstack gives sandboxctl's main goroutine a 64 KiB stack
// before the initialisers of what it links run. A goroutine starts with
// 2 KiB and the runtime doubles its stack as it runs out, copying it and
// adjusting every frame on it, and the initialisers reach 31 KiB deep
// (protojson's regular expression compiles recursively): five copies at
// every start, the last ones of a deep stack whose frames' tables the
// runtime reads from a binary just mapped. Grown here, with a few frames
// on it, the stack is copied once, and the main goroutine keeps it: a
// short-lived client never collects garbage, which is when a stack
// shrinks (see docs/performance.md). Imported by main ahead of the
// packages whose initialisers go deep.
package mainstack

func init() {
	grow()
}

// frame is more than half of 64 KiB, so that the runtime, doubling from
// 2 KiB until the frame fits, stops at 64 KiB, and little more than the
// initialisers use, so that it touches few pages they would not.
const frame = 34 << 10

//go:noinline
func grow() {
	var f [frame]byte
	touch(f[:])
}

// touch keeps f, and so the frame, from being optimised away; f does not
// escape, so it stays on the stack.
//
//go:noinline
func touch(f []byte) { f[0] = 1 }
