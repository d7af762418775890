//go:build !windows

package client

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// dialSocket connects to the daemon's unix socket at path.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// nothingListens says whether a failed dialSocket found no daemon: no
// socket, or one nobody accepts on (left by a daemon that died).
func nothingListens(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}
