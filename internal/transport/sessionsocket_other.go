//go:build !unix && !windows

package transport

import (
	"errors"
	"fmt"
	"runtime"

	"google.golang.org/grpc"
)

// OpenSessionSocket fails: this OS has neither unix sockets nor named
// pipes to serve a session on.
func OpenSessionSocket(srv *grpc.Server, dir, id string, uid, gid uint32) (*SessionSocket, error) {
	return nil, fmt.Errorf("session socket on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// PrepareSessionSocketDir has nothing to do where there are none.
func PrepareSessionSocketDir(string) error { return nil }
