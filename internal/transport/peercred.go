// Package transport is how callers reach the daemon on each OS: the main
// socket or named pipe, the sockets made for single sessions, socket
// activation, and the kernel's word on who is at the other end of a
// connection.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Caller is who made a request, as the kernel reported it for the
// connection (never as the request claims).
type Caller struct {
	UID, GID uint32
	PID      int32
	// Groups are the caller's supplementary groups.
	Groups []uint32
	// SID is the caller's user SID on Windows, where UID and GID are zero
	// and say nothing; empty on unix.
	SID string
	// Admin is set on Windows for a caller that sees and controls every
	// session, as root does on unix: LocalSystem, the daemon's own account,
	// or a token in which BUILTIN\Administrators is enabled (elevated).
	Admin bool
	// Session is the session whose own socket the call came in on, empty
	// on the main socket.
	Session string
}

// peerAuth is a connection's AuthInfo: who the kernel says is at the other
// end of the socket.
type peerAuth struct {
	credentials.CommonAuthInfo
	caller Caller
}

func (peerAuth) AuthType() string { return "peercred" }

// Credentials are server-side transport credentials that exchange nothing on
// the wire; the handshake only asks the kernel for the peer's identity, so
// clients connect with plain insecure credentials and cannot lie about who
// they are.
//
// The handshake is also where a caller's connections are counted: one at
// its quota is refused before any of its requests is read.
type Credentials struct {
	// Admit, if set, is asked about every connection once its caller is
	// known: an error refuses it, and release runs once when it closes.
	Admit func(Caller) (release func(), err error)
}

func (p Credentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, err := peerCaller(conn)
	if err != nil {
		return nil, nil, fmt.Errorf("peer credentials: %w", err)
	}
	if p.Admit != nil {
		release, err := p.Admit(c)
		if err != nil {
			return nil, nil, err
		}
		conn = admitted(conn, release)
	}
	// The socket never leaves the host, like grpc's own local credentials
	// over unix sockets.
	return conn, peerAuth{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, caller: c}, nil
}

func (Credentials) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("peer credentials are server-side only")
}

func (Credentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}

func (p Credentials) Clone() credentials.TransportCredentials { return p }

func (Credentials) OverrideServerName(string) error { return nil }

// admittedConn gives its caller's connection back when closed.
type admittedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *admittedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// CallerFrom returns the identity recorded by Credentials for the
// connection a request came in on; false if there is none.
func CallerFrom(ctx context.Context) (Caller, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Caller{}, false
	}
	a, ok := p.AuthInfo.(peerAuth)
	if !ok {
		return Caller{}, false
	}
	return a.caller, true
}
