//go:build linux || darwin

package transport

import (
	"fmt"
	"net"
)

// peerCaller asks the kernel for the credentials the peer had when it
// connected, which a client cannot forge. A connection accepted on a
// session's socket also carries that session.
func peerCaller(conn net.Conn) (Caller, error) {
	var scope string
	if sc, ok := conn.(*scopedConn); ok {
		scope, conn = sc.session, sc.Conn
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return Caller{}, fmt.Errorf("%T is not a unix socket connection", conn)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, fmt.Errorf("raw connection: %w", err)
	}
	var (
		c       Caller
		credErr error
	)
	if err := rc.Control(func(fd uintptr) { c, credErr = socketPeer(int(fd)) }); err != nil {
		return Caller{}, fmt.Errorf("raw connection: %w", err)
	}
	if credErr != nil {
		return Caller{}, credErr
	}
	c.Session = scope
	return c, nil
}
