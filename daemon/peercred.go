package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// peerAuth is a connection's AuthInfo: who the kernel says is at the other
// end of the socket.
type peerAuth struct {
	credentials.CommonAuthInfo
	caller Caller
}

func (peerAuth) AuthType() string { return "peercred" }

// peerCreds are server-side transport credentials that exchange nothing on
// the wire; the handshake only asks the kernel for the peer's identity, so
// clients connect with plain insecure credentials and cannot lie about who
// they are.
//
// The handshake is also where a caller's connections are counted: one at
// its quota is refused before any of its requests is read.
type peerCreds struct {
	quotas *quotas // nil counts nothing
}

func (p peerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, err := peerCaller(conn)
	if err != nil {
		return nil, nil, fmt.Errorf("peer credentials: %w", err)
	}
	if p.quotas != nil {
		key := quotaKey(c)
		if err := p.quotas.acquire(key, quotaConns); err != nil {
			return nil, nil, err
		}
		conn = &quotaConn{Conn: conn, release: func() { p.quotas.release(key, quotaConns) }}
	}
	// The socket never leaves the host, like grpc's own local credentials
	// over unix sockets.
	return conn, peerAuth{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, caller: c}, nil
}

func (peerCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("peer credentials are server-side only")
}

func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}

func (p peerCreds) Clone() credentials.TransportCredentials { return p }

func (peerCreds) OverrideServerName(string) error { return nil }

// callerFrom returns the identity recorded by peerCreds for the connection
// a request came in on.
func callerFrom(ctx context.Context) (Caller, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Caller{}, ErrUnauthenticated
	}
	a, ok := p.AuthInfo.(peerAuth)
	if !ok {
		return Caller{}, ErrUnauthenticated
	}
	return a.caller, nil
}
