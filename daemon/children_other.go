//go:build !unix && !windows

package daemon

import (
	"errors"
	"fmt"
	"runtime"

	"google.golang.org/grpc"
)

// openSessionSocket fails: this OS has neither unix sockets nor named
// pipes to serve a session on.
func openSessionSocket(srv *grpc.Server, dir, id string, uid, gid uint32) (*sessionSocket, error) {
	return nil, fmt.Errorf("session socket on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// removeStaleSessionSockets has nothing to do where there are none.
func removeStaleSessionSockets(string) error { return nil }
