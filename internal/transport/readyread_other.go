//go:build !unix

package transport

import "net"

// admitted wraps an admitted connection. grpc reads a named pipe through a
// buffer of its own, wrapped or not (see readyread_unix.go).
func admitted(c net.Conn, release func()) net.Conn {
	return &admittedConn{Conn: c, release: release}
}
