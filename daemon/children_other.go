//go:build !unix

package daemon

import (
	"errors"
	"fmt"
	"runtime"

	"google.golang.org/grpc"
)

// openSessionSocket fails: this OS's daemon listens on a named pipe, and
// per-session pipes are its backend's to make.
func openSessionSocket(srv *grpc.Server, dir, id string, uid, gid uint32) (*sessionSocket, error) {
	return nil, fmt.Errorf("session socket on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// removeStaleSessionSockets has nothing to do where there are none.
func removeStaleSessionSockets(string) error { return nil }
