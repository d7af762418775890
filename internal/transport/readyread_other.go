//go:build !linux

package transport

import "net"

// admitted wraps an admitted connection. Off Linux grpc reads even a bare
// socket or named pipe through a buffer of its own (see readyread_linux.go).
func admitted(c net.Conn, release func()) net.Conn {
	return &admittedConn{Conn: c, release: release}
}
