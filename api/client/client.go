// Package client is the Go client for sandboxd: it dials the daemon's socket
// (a named pipe on Windows), runs sessions over the Session stream, and
// wraps the operator calls (List, Inspect, Kill, Capabilities). Errors keep the daemon's gRPC status, so callers can read
// the code and the Unenforceable detail of a refusal.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/socketpath"
)

// HandshakeTimeout bounds how long a listener on the socket has to show
// that it speaks gRPC's HTTP/2 at all (its first SETTINGS frame, sent by a
// gRPC server as soon as it accepts): a socket whose listener does not is
// reported as not being a daemon, instead of hanging.
const HandshakeTimeout = 5 * time.Second

// DialTimeout bounds Dial as a whole when ctx has no deadline: connecting,
// retried with backoff while the daemon closes the connection unanswered
// (at this user's quota of connections). A session refused for now
// (ResourceExhausted with a retry hint) is retried for as long.
const DialTimeout = 2 * time.Minute

// ErrDaemonGone is wrapped by errors from a session whose connection to the
// daemon broke before the session's Exit arrived.
var ErrDaemonGone = errors.New("sandboxd went away")

// Client is a connection to one sandboxd.
type Client struct {
	socket string
	conn   *grpc.ClientConn
	rpc    sandboxdv1grpc.SandboxdClient
	// probed is the connection Dial made, until gRPC takes it (or Close
	// closes it).
	probed atomic.Pointer[net.Conn]
}

// Dial connects to the daemon listening on socketPath ("" means
// socketpath.Default()) within ctx (DialTimeout when it has no deadline).
// A missing socket, a stale one, or a listener that does not speak gRPC's
// HTTP/2 fails here with an error naming the socket. A gRPC server that is
// not sandboxd is told apart by the first call, which fails with an error
// saying so: Dial spends no call of its own on it, since a call is a round
// trip to the daemon that every sandboxctl command would wait for.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	if socketPath == "" {
		socketPath = socketpath.Default()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DialTimeout)
		defer cancel()
	}
	begin := time.Now()
	var b backoff
	var first net.Conn
	for {
		var err error
		first, err = probe(ctx, socketPath)
		if err == nil {
			break
		}
		if !errors.Is(err, errClosedEarly) || !b.wait(ctx, nil) {
			if errors.Is(err, errClosedEarly) {
				return nil, fmt.Errorf("sandboxd on %s closed every connection before answering for %v (at this user's quota of connections?)", socketPath, time.Since(begin).Round(100*time.Millisecond))
			}
			return nil, err
		}
	}

	// The probed connection is gRPC's first, so a client connects once;
	// a reconnection dials afresh.
	c := &Client{socket: socketPath}
	c.probed.Store(&first)
	// The passthrough target with our own dialer keeps the socket path out
	// of grpc's URI parsing, which mangles paths with spaces or '%'.
	conn, err := grpc.NewClient("passthrough:///sandboxd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			if pc := c.probed.Swap(nil); pc != nil {
				return *pc, nil
			}
			return dialSocket(ctx, socketPath)
		}),
		// A List of thousands of live sessions is several MiB; the peer is
		// the local daemon, not a stranger to be wary of.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReply)),
		// The daemon's send window is what this side advertises. gRPC's
		// default (64 KiB, grown by ping-measured bandwidth-delay) holds a
		// session's output to a few messages in flight and adds a ping
		// round trip per burst; over a local socket a fixed window that
		// covers a burst is simply faster.
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(streamWindow),
	)
	if err != nil {
		first.Close()
		return nil, fmt.Errorf("sandboxd client for %s: %w", socketPath, err)
	}
	c.conn, c.rpc = conn, sandboxdv1grpc.NewSandboxdClient(conn)
	// gRPC sets its transport up on the probed connection meanwhile,
	// rather than when the caller's first call is already waiting.
	conn.Connect()
	return c, nil
}

// errClosedEarly: the listener accepted and closed the connection without
// a word, which sandboxd does to a caller at its quota of connections.
var errClosedEarly = errors.New("connection closed before the server spoke")

// probe connects once and waits, within HandshakeTimeout, for the
// listener's first HTTP/2 frame. grpc would report a missing socket, a
// listener speaking something else and one that is merely slow all as
// "unavailable"; this tells them apart. The connection it returns reads
// that frame header again first, for gRPC to take over.
func probe(ctx context.Context, socketPath string) (net.Conn, error) {
	pctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	begin := time.Now()
	conn, err := dialSocket(pctx, socketPath)
	if err != nil {
		// The path is already in our message; keep only the reason.
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if nothingListens(err) {
			return nil, fmt.Errorf("no sandboxd listening on %s (is the daemon running?): %w", socketPath, err)
		}
		return nil, fmt.Errorf("cannot connect to sandboxd on %s: %w", socketPath, err)
	}
	if d, ok := pctx.Deadline(); ok {
		_ = conn.SetReadDeadline(d)
	}
	// An HTTP/2 frame header: 3 bytes of length, then the type; a server
	// starts with SETTINGS (type 4).
	var hdr [9]byte
	n, err := io.ReadFull(conn, hdr[:])
	if n == len(hdr) && hdr[3] == 4 {
		if err := conn.SetReadDeadline(time.Time{}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("connection to sandboxd on %s: %w", socketPath, err)
		}
		return &replayConn{Conn: conn, pending: hdr[:]}, nil
	}
	conn.Close()
	switch {
	case n > 0:
		return nil, fmt.Errorf("%s does not speak sandboxd's protocol: it answered %q", socketPath, hdr[:n])
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("%s did not answer as sandboxd within %v (is something else listening there?)", socketPath, time.Since(begin).Round(100*time.Millisecond))
	default:
		return nil, errClosedEarly
	}
}

// replayConn is a connection whose first bytes, already read, are read
// again.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// streamWindow is the flow-control window this client advertises per
// stream and per connection: a fixed size turns off gRPC's bandwidth
// probing, whose pings cost a round trip on every burst of output.
const streamWindow = 1 << 20

// maxReply bounds one reply: about 10 KiB per session for List.
const maxReply = 256 << 20

// checkID is no session's id: the daemon's ids are hex.
const checkID = "handshake"

// notSandboxd returns, for a call that failed with err, the error saying
// that the server on the socket is not sandboxd, or nil when it is or err
// is not Unimplemented. Any gRPC server answers an unknown method with
// Unimplemented, and sandboxd answers with it too (a signal its OS cannot
// deliver, a service an older daemon lacks), so the server is asked the
// cheapest call only sandboxd answers otherwise: Inspect of an id no
// session has is NotFound there.
func (c *Client) notSandboxd(ctx context.Context, err error) error {
	if status.Code(err) != codes.Unimplemented {
		return nil
	}
	_, cerr := c.rpc.Inspect(ctx, &sandboxdv1.InspectRequest{Id: checkID})
	st := status.Convert(cerr)
	if st.Code() != codes.Unimplemented {
		return nil
	}
	return newRPCError(fmt.Sprintf("%s is a gRPC server but not sandboxd: %s", c.socket, st.Message()), st, nil)
}

// Socket is the path of the socket this client is connected to.
func (c *Client) Socket() string { return c.socket }

// Close closes the connection. Sessions still running on it are cancelled.
func (c *Client) Close() error {
	if pc := c.probed.Swap(nil); pc != nil {
		(*pc).Close()
	}
	return c.conn.Close()
}

// List returns the sessions the daemon shows this caller.
func (c *Client) List(ctx context.Context) ([]*sandboxdv1.SessionInfo, error) {
	resp, err := c.rpc.List(ctx, &sandboxdv1.ListRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "list sessions", err)
	}
	return resp.GetSessions(), nil
}

// Inspect returns one session, including its policy and enforcement report.
func (c *Client) Inspect(ctx context.Context, id string) (*sandboxdv1.SessionInfo, error) {
	info, err := c.rpc.Inspect(ctx, &sandboxdv1.InspectRequest{Id: id})
	if err != nil {
		return nil, c.wrap(ctx, "inspect "+id, err)
	}
	return info, nil
}

// Screen returns what a terminal session's screen shows now, as the
// daemon's virtual terminal follows its output; nil for a session without
// a terminal. It attaches nothing: the session is not disturbed.
func (c *Client) Screen(ctx context.Context, id string) (*sandboxdv1.Screen, error) {
	info, err := c.rpc.Inspect(ctx, &sandboxdv1.InspectRequest{Id: id, Screen: true})
	if err != nil {
		return nil, c.wrap(ctx, "screen "+id, err)
	}
	return info.GetScreen(), nil
}

// Kill sends signal (a Linux signal number) to the session's process; 0
// kills the whole sandbox with SIGKILL.
func (c *Client) Kill(ctx context.Context, id string, signal int32) error {
	if _, err := c.rpc.Kill(ctx, &sandboxdv1.KillRequest{Id: id, Signal: signal}); err != nil {
		return c.wrap(ctx, "kill "+id, err)
	}
	return nil
}

// Capabilities returns what the daemon's backend can enforce on its host,
// per policy feature, and the daemon's latest self-test.
func (c *Client) Capabilities(ctx context.Context) (*sandboxdv1.CapabilitiesReport, error) {
	r, err := c.rpc.Capabilities(ctx, &sandboxdv1.CapabilitiesRequest{})
	if err != nil {
		return nil, c.wrap(ctx, "capabilities", err)
	}
	return r, nil
}

// rpcError puts context in front of a daemon's status message while keeping
// the status itself (code and details) reachable through status.FromError;
// wrapping with fmt.Errorf would bury "rpc error: code = ..." in the text.
type rpcError struct {
	msg   string
	st    *status.Status
	cause error
}

func newRPCError(msg string, st *status.Status, cause error) *rpcError {
	return &rpcError{msg: msg, st: st, cause: cause}
}

func (e *rpcError) Error() string              { return e.msg }
func (e *rpcError) GRPCStatus() *status.Status { return e.st }
func (e *rpcError) Unwrap() error              { return e.cause }

// wrap prefixes err with op, keeping its gRPC status if it has one; err
// from a server that is not sandboxd says that instead.
func (c *Client) wrap(ctx context.Context, op string, err error) error {
	if nerr := c.notSandboxd(ctx, err); nerr != nil {
		return nerr
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	return newRPCError(op+": "+st.Message(), st, nil)
}

// Watch follows the daemon's session events: first a snapshot of every
// matching live session, then each state change and denial as it happens.
// It calls fn for each, in the daemon's order, until ctx ends (nil), fn
// returns an error (that error), or the daemon ends the stream.
func (c *Client) Watch(ctx context.Context, req *sandboxdv1.WatchRequest, fn func(*sandboxdv1.Event) error) error {
	stream, err := c.rpc.Watch(ctx, req)
	if err != nil {
		return c.wrap(ctx, "watch", err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return c.wrap(ctx, "watch", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}
