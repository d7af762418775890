//go:build !linux

package daemon

import (
	"os"

	"github.com/sandboxd/sandboxd/internal/fdwait"
)

// stdioPipe makes one pipe of a session's standard streams and returns the
// daemon's end and the sandbox's.
func stdioPipe(sandboxReads bool) (daemonEnd *fdwait.Lazy, sandboxEnd *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if sandboxReads {
		return fdwait.Opened(w), r, nil
	}
	return fdwait.Opened(r), w, nil
}

// pipePage is the length of a short pipe, where pipes have one.
var pipePage = os.Getpagesize()

// resizePipe leaves the pipe as it is: only Linux changes a pipe's length.
func resizePipe(fd uintptr, long bool) {}
