// Package oneproc puts sandboxctl's Go code on one processor before the
// initialisers of what it links run. A client's work is a few waits on one
// connection; with a processor per CPU the runtime starts threads that look
// for work and park again, and on two CPUs that cost more CPU at every
// start than the client's own code (see docs/performance.md). Imported
// first by main, so that it is initialised before the protobuf and gRPC
// packages.
//
// It imports nothing but the runtime, so that it is initialised before
// any package that allocates: the processor given up takes its cache of
// spans with it, one page of the runtime's to hand back each size class
// that cache holds, and the main goroutine runs its initialisers on
// either processor. Behind syscall and the packages before it in the
// order of initialisation, that was 35 to 45 page faults in half the
// starts. $GOMAXPROCS, which reading would take syscall, is honoured
// later (Honour).
package oneproc

import "runtime"

func init() {
	runtime.GOMAXPROCS(1)
}

// Honour gives the runtime the processors $GOMAXPROCS asks for, as the
// runtime reads it at start: value is the variable's, set whether it is
// set, and a value that is not a number from 1 to 2^31-1 is ignored.
func Honour(value string, set bool) {
	if n, ok := processors(value); set && ok {
		runtime.GOMAXPROCS(n)
	}
}

// processors parses value as the runtime parses $GOMAXPROCS
// (strconv.ParseInt(value, 10, 32), kept if above 0), without strconv,
// which would put its dependencies' initialisers ahead of this package's.
func processors(value string) (int, bool) {
	digits := value
	if len(digits) > 0 && digits[0] == '+' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false
	}
	const most = 1<<31 - 1
	n := 0
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
		// Checked before the digit is added: a 32-bit int would wrap
		// past most, to a number that passes.
		d := int(c - '0')
		if n > (most-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, n > 0
}
