// Package oneproc puts sandboxctl's Go code on one processor before the
// initialisers of what it links run, unless $GOMAXPROCS says otherwise.
// A client's work is a few waits on one connection; with a processor per
// CPU the runtime starts threads that look for work and park again, and
// on two CPUs that cost more CPU at every start than the client's own
// code (see docs/performance.md). Imported first by main, so that it is
// initialised before the protobuf and gRPC packages.
package oneproc

import (
	"runtime"
	"syscall"
)

func init() {
	if _, set := syscall.Getenv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}
