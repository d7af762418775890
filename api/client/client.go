// Package client is the Go client for sandboxd: it dials the daemon's socket
// (a named pipe on Windows), runs sessions over the Session stream, and
// wraps the operator calls (List, Inspect, Kill, Capabilities). Errors keep the daemon's gRPC status, so callers can read
// the code and the Unenforceable detail of a refusal. It speaks gRPC
// without grpc-go (package internal/grpcconn), whose client would cost
// every start of a program linking it more than the rest of sandboxctl's.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/grpcconn"
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
	mu     sync.Mutex
	conn   *grpcconn.Conn
	closed bool
	// eager: from Connect, whose connections are not waited on before
	// their first call; silent is the one the daemon did not answer
	// within HandshakeTimeout, closed for it.
	eager  bool
	silent atomic.Pointer[grpcconn.Conn]
}

// The methods this client calls: sandboxd.v1's, as in its services.
const (
	methodSession      = "/sandboxd.v1.Sandboxd/Session"
	methodList         = "/sandboxd.v1.Sandboxd/List"
	methodInspect      = "/sandboxd.v1.Sandboxd/Inspect"
	methodKill         = "/sandboxd.v1.Sandboxd/Kill"
	methodCapabilities = "/sandboxd.v1.Sandboxd/Capabilities"
	methodWatch        = "/sandboxd.v1.Sandboxd/Watch"
	methodListLayers   = "/sandboxd.v1.Layers/ListLayers"
	methodDiff         = "/sandboxd.v1.Layers/Diff"
	methodCommit       = "/sandboxd.v1.Layers/Commit"
	methodDiscard      = "/sandboxd.v1.Layers/Discard"
)

// connOptions: a List of thousands of live sessions is several MiB, and
// the peer is the local daemon, not a stranger to be wary of. The window
// is fixed and large: over a local socket a window that covers a burst of
// output is simply faster than one grown by measuring. Every call says
// that this client takes Output messages of up to outputMessage bytes: it
// receives each into a buffer of the message's length, so a larger one
// costs it nothing more, and fewer of them move a flood of output faster.
var connOptions = grpcconn.Options{
	Window:         streamWindow,
	MaxRecvMsgSize: maxReply,
	Authority:      "sandboxd",
	Metadata:       [][2]string{{outputMessageMetadata, strconv.Itoa(outputMessage)}},
}

// outputMessageMetadata and outputMessage: the daemon sends Output messages
// of up to 128 KiB to a client that names at least that under this key
// (daemon's outputMessageMetadata), of up to 32 KiB to any other.
const (
	outputMessageMetadata = "sandboxd-output-message-max"
	outputMessage         = 128 << 10
)

// Dial connects to the daemon listening on socketPath ("" means
// socketpath.Default()) within ctx (DialTimeout when it has no deadline).
// A missing socket, a stale one, or a listener that does not speak gRPC's
// HTTP/2 fails here with an error naming the socket. A gRPC server that is
// not sandboxd is told apart by the first call, which fails with an error
// saying so: Dial spends no call of its own on it, since a call is a round
// trip to the daemon that every sandboxctl command would wait for.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	ctx, cancel, socketPath := dialDefaults(ctx, socketPath)
	defer cancel()
	begin := time.Now()
	var b backoff
	for {
		conn, err := probe(ctx, socketPath)
		if err == nil {
			return &Client{socket: socketPath, conn: conn}, nil
		}
		if !errors.Is(err, errClosedEarly) || !b.wait(ctx, nil) {
			if errors.Is(err, errClosedEarly) {
				return nil, closedEarly(socketPath, time.Since(begin))
			}
			return nil, err
		}
	}
}

// dialDefaults fills in what Dial and Connect were not given: the default
// socket, and DialTimeout when ctx has no deadline.
func dialDefaults(ctx context.Context, socketPath string) (context.Context, context.CancelFunc, string) {
	if socketPath == "" {
		socketPath = socketpath.Default()
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, socketPath
	}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	return ctx, cancel, socketPath
}

// errClosedEarly: the listener accepted and closed the connection without
// a word, which sandboxd does to a caller at its quota of connections.
var errClosedEarly = errors.New("connection closed before the server spoke")

// closedEarly is Dial's error when every connection for d was closed
// early.
func closedEarly(socketPath string, d time.Duration) error {
	return fmt.Errorf("sandboxd on %s closed every connection before answering for %v (at this user's quota of connections?)", socketPath, d.Round(100*time.Millisecond))
}

// probe connects once and starts HTTP/2 on the connection, then waits,
// within HandshakeTimeout, for the listener's first frame. A missing
// socket, a listener speaking something else and one that is merely slow
// are told apart here. The client's own preface has gone out meanwhile,
// so the first call follows with nothing left to wait for.
func probe(ctx context.Context, socketPath string) (*grpcconn.Conn, error) {
	pctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	begin := time.Now()
	nc, err := dialSocket(pctx, socketPath)
	if err != nil {
		return nil, connectError(socketPath, err)
	}
	conn := grpcconn.Start(nc, connOptions)
	select {
	case <-conn.FirstFrame():
	case <-pctx.Done():
		conn.Close()
		return nil, noAnswer(socketPath, time.Since(begin))
	}
	if err := firstFrameError(socketPath, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// connectError is Dial's error for dialSocket's err.
func connectError(socketPath string, err error) error {
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
		return fmt.Errorf("no sandboxd listening on %s (is the daemon running?): %w", socketPath, err)
	}
	return fmt.Errorf("cannot connect to sandboxd on %s: %w", socketPath, err)
}

// noAnswer is Dial's error for a listener that sent nothing for d.
func noAnswer(socketPath string, d time.Duration) error {
	return fmt.Errorf("%s did not answer as sandboxd within %v (is something else listening there?)", socketPath, d.Round(100*time.Millisecond))
}

// firstFrameError is Dial's error for how conn, whose first frame has
// arrived or failed to, began: nil for as a gRPC server does.
func firstFrameError(socketPath string, conn *grpcconn.Conn) error {
	var nh *grpcconn.NotHTTP2Error
	switch err := conn.FirstErr(); {
	case err == nil:
		return nil
	case errors.As(err, &nh):
		return fmt.Errorf("%s does not speak sandboxd's protocol: it answered %q", socketPath, nh.Answer)
	default:
		return errClosedEarly
	}
}

// Connect is Dial for a caller whose first call follows at once (sandboxctl
// run): it does not wait for the daemon's first frame, so the first call's
// request goes out right behind the client's preface instead of a round
// trip later. What Dial would have refused fails a call made before the
// daemon's first frame arrived instead, with Dial's error: a listener that
// does not speak gRPC's HTTP/2, or does not answer within
// HandshakeTimeout. Run retries, with backoff and within DialTimeout, a
// session whose connection the daemon closed unanswered (at this user's
// quota of connections): the daemon has read nothing of it.
func Connect(ctx context.Context, socketPath string) (*Client, error) {
	ctx, cancel, socketPath := dialDefaults(ctx, socketPath)
	defer cancel()
	nc, err := dialSocket(ctx, socketPath)
	if err != nil {
		return nil, connectError(socketPath, err)
	}
	c := &Client{socket: socketPath, eager: true}
	c.conn = c.start(nc)
	return c, nil
}

// start begins the connection on nc; on a client from Connect, one that
// the daemon has not answered within HandshakeTimeout is closed, and
// remembered as silent.
func (c *Client) start(nc net.Conn) *grpcconn.Conn {
	conn := grpcconn.Start(nc, connOptions)
	if c.eager {
		time.AfterFunc(HandshakeTimeout, func() {
			select {
			case <-conn.FirstFrame():
			default:
				c.silent.Store(conn)
				conn.Close()
			}
		})
	}
	return conn
}

// handshakeError is, for a call on conn that failed, Dial's error when the
// call failed because conn never began as a daemon's does: nil otherwise.
func (c *Client) handshakeError(conn *grpcconn.Conn) error {
	if !c.eager {
		return nil
	}
	if c.silent.Load() == conn {
		return noAnswer(c.socket, HandshakeTimeout)
	}
	select {
	case <-conn.FirstFrame():
		return firstFrameError(c.socket, conn)
	default:
		return nil
	}
}

// connection is the connection for a new call: Dial's, or a new one once
// that one broke or the daemon closed it.
func (c *Client) connection(ctx context.Context) (*grpcconn.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, status.Error(codes.Canceled, "grpc: the client connection is closing")
	}
	if c.conn.Usable() {
		return c.conn, nil
	}
	nc, err := dialSocket(ctx, c.socket)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connection error: %v", err)
	}
	c.conn = c.start(nc)
	return c.conn, nil
}

// invoke makes one unary call.
func (c *Client) invoke(ctx context.Context, method string, req, resp proto.Message) error {
	conn, err := c.connection(ctx)
	if err != nil {
		return err
	}
	return conn.Invoke(ctx, method, req, resp)
}

// stream begins one streaming call.
func (c *Client) stream(ctx context.Context, method string) (*grpcconn.Stream, error) {
	conn, err := c.connection(ctx)
	if err != nil {
		return nil, err
	}
	return conn.NewStream(ctx, method)
}

// streamWindow is the flow-control window this client advertises per
// stream and per connection.
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
	cerr := c.invoke(ctx, methodInspect, &sandboxdv1.InspectRequest{Id: checkID}, &sandboxdv1.SessionInfo{})
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.conn.Close()
}

// List returns the sessions the daemon shows this caller.
func (c *Client) List(ctx context.Context) ([]*sandboxdv1.SessionInfo, error) {
	resp := &sandboxdv1.ListResponse{}
	if err := c.invoke(ctx, methodList, &sandboxdv1.ListRequest{}, resp); err != nil {
		return nil, c.wrap(ctx, "list sessions", err)
	}
	return resp.GetSessions(), nil
}

// Inspect returns one session, including its policy and enforcement report.
func (c *Client) Inspect(ctx context.Context, id string) (*sandboxdv1.SessionInfo, error) {
	info := &sandboxdv1.SessionInfo{}
	if err := c.invoke(ctx, methodInspect, &sandboxdv1.InspectRequest{Id: id}, info); err != nil {
		return nil, c.wrap(ctx, "inspect "+id, err)
	}
	return info, nil
}

// Screen returns what a terminal session's screen shows now, as the
// daemon's virtual terminal follows its output; nil for a session without
// a terminal. It attaches nothing: the session is not disturbed.
func (c *Client) Screen(ctx context.Context, id string) (*sandboxdv1.Screen, error) {
	info := &sandboxdv1.SessionInfo{}
	if err := c.invoke(ctx, methodInspect, &sandboxdv1.InspectRequest{Id: id, Screen: true}, info); err != nil {
		return nil, c.wrap(ctx, "screen "+id, err)
	}
	return info.GetScreen(), nil
}

// Kill sends signal (a Linux signal number) to the session's process; 0
// kills the whole sandbox with SIGKILL.
func (c *Client) Kill(ctx context.Context, id string, signal int32) error {
	if err := c.invoke(ctx, methodKill, &sandboxdv1.KillRequest{Id: id, Signal: signal}, &sandboxdv1.KillResponse{}); err != nil {
		return c.wrap(ctx, "kill "+id, err)
	}
	return nil
}

// Capabilities returns what the daemon's backend can enforce on its host,
// per policy feature, and the daemon's latest self-test.
func (c *Client) Capabilities(ctx context.Context) (*sandboxdv1.CapabilitiesReport, error) {
	r := &sandboxdv1.CapabilitiesReport{}
	if err := c.invoke(ctx, methodCapabilities, &sandboxdv1.CapabilitiesRequest{}, r); err != nil {
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
	stream, err := c.stream(ctx, methodWatch)
	if err != nil {
		return c.wrap(ctx, "watch", err)
	}
	// fn may end the watch: the daemon stops sending then too.
	defer stream.Cancel()
	// An io.EOF means the stream is already over; Recv says why.
	if err := stream.SendLast(req); err != nil && !errors.Is(err, io.EOF) {
		return c.wrap(ctx, "watch", err)
	}
	for {
		ev := &sandboxdv1.Event{}
		if err := stream.Recv(ev); err != nil {
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
