package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// WindowSize is a terminal size in character cells.
type WindowSize struct {
	Rows, Cols uint32
}

// RunOptions says what to start and where its stdio goes.
type RunOptions struct {
	// Start is the first message of the session: policy, command, tty and
	// the initial window size.
	Start *sandboxdv1.Start
	// Stdin is forwarded to the process once the session has started; at
	// its end (EOF or a read error) the process's stdin is closed. Nil
	// closes it at once. A Read blocked when the session ends is left
	// behind: Run does not wait for it.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it. A
	// write error ends the session.
	Stdout, Stderr io.Writer
	// Resize carries terminal size changes of a tty session.
	Resize <-chan WindowSize
	// Signals carries signals to deliver to the process, as Linux signal
	// numbers (the wire numbering on every OS).
	Signals <-chan int32
}

// Result is how a session ended.
type Result struct {
	// SessionID, Digest and Enforcement come from Started; they are empty
	// when the command failed to start.
	SessionID   string
	Digest      string
	Enforcement *sandboxdv1.EnforcementReport
	// Exit is the session's one Exit message.
	Exit *sandboxdv1.Exit
}

// Run starts one session and runs it to its Exit. The error is non-nil when
// the daemon refused the session (its gRPC status is kept: see
// UnenforceableFrom), the connection broke before Exit (the error wraps
// ErrDaemonGone), ctx ended, or writing output failed. A command that could
// not be executed is not an error: it is a Result whose Exit has state
// FAILED_TO_START.
func (c *Client) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	if opts.Start == nil {
		return nil, errors.New("run: RunOptions.Start is nil")
	}
	// Cancelling the stream is how the daemon learns that nobody is
	// listening any more, so every early return below ends the session.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Session(sctx)
	if err != nil {
		return nil, c.streamError(ctx, "", err)
	}
	s := &sender{stream: stream}
	// A failed Send means the stream is already over; Recv below reports why.
	_ = s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: opts.Start}})

	res := &Result{}
	started := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil, c.streamError(ctx, res.SessionID, err)
		}
		switch m := resp.Msg.(type) {
		case *sandboxdv1.SessionResponse_Started:
			if started {
				continue
			}
			started = true
			res.SessionID = m.Started.GetSessionId()
			res.Digest = m.Started.GetPolicyDigest()
			res.Enforcement = m.Started.GetEnforcement()
			go s.forwardStdin(sctx, opts.Stdin)
			go s.forwardResizes(sctx, opts.Resize)
			go c.forwardSignals(sctx, res.SessionID, opts.Signals)
		case *sandboxdv1.SessionResponse_Output:
			w := opts.Stdout
			if m.Output.GetStream() == sandboxdv1.Output_STDERR {
				w = opts.Stderr
			}
			if w == nil {
				continue
			}
			if _, err := w.Write(m.Output.GetData()); err != nil {
				return nil, fmt.Errorf("session %s: writing %s: %w", res.SessionID, m.Output.GetStream(), err)
			}
		case *sandboxdv1.SessionResponse_Exit:
			res.Exit = m.Exit
			return res, nil
		}
	}
}

// streamError explains why the stream of session id ("" before Started)
// ended without an Exit.
func (c *Client) streamError(ctx context.Context, id string, err error) error {
	op, when := "start session", "before the session started"
	if id != "" {
		op, when = "session "+id, "before session "+id+" ended"
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if errors.Is(err, io.EOF) {
		st := status.New(codes.Unavailable, "stream ended without an exit status")
		return newRPCError(fmt.Sprintf("%v %s (socket %s): the stream ended without an exit status", ErrDaemonGone, when, c.socket), st, ErrDaemonGone)
	}
	st := status.Convert(err)
	// Unavailable is a broken connection; Canceled without our ctx being
	// done is the daemon resetting the stream on its way down.
	if st.Code() == codes.Unavailable || st.Code() == codes.Canceled {
		return newRPCError(fmt.Sprintf("%v %s (socket %s): %s", ErrDaemonGone, when, c.socket, st.Message()), st, ErrDaemonGone)
	}
	return newRPCError(fmt.Sprintf("%s: %s", op, st.Message()), st, nil)
}

// sender serializes sends: a grpc stream allows one sender at a time, and
// stdin, resizes and signals come from different goroutines.
type sender struct {
	mu     sync.Mutex
	stream interface {
		Send(*sandboxdv1.SessionRequest) error
	}
}

func (s *sender) send(req *sandboxdv1.SessionRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(req)
}

func (s *sender) forwardStdin(ctx context.Context, r io.Reader) {
	if r != nil {
		buf := make([]byte, 32<<10)
		for ctx.Err() == nil {
			n, err := r.Read(buf)
			if n > 0 {
				// grpc may read a sent message lazily, so each gets its own copy.
				data := append([]byte(nil), buf[:n]...)
				if s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Data: data}}}) != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
	if ctx.Err() == nil {
		_ = s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Eof: true}}})
	}
}

func (s *sender) forwardResizes(ctx context.Context, resize <-chan WindowSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case ws, ok := <-resize:
			if !ok {
				return
			}
			req := &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Resize{Resize: &sandboxdv1.WindowSize{Rows: ws.Rows, Cols: ws.Cols}}}
			if s.send(req) != nil {
				return
			}
		}
	}
}

// forwardSignals delivers signals with the Kill RPC rather than on the
// session stream: a command that does not read its input leaves the stream
// stalled behind stdin the client already sent, and an interrupt must still
// get through.
func (c *Client) forwardSignals(ctx context.Context, id string, signals <-chan int32) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-signals:
			if !ok {
				return
			}
			if sig == 0 {
				// 0 means "kill the whole sandbox" to the Kill RPC; a
				// signal 0 only probes, so there is nothing to send.
				continue
			}
			if _, err := c.rpc.Kill(ctx, &sandboxdv1.KillRequest{Id: id, Signal: sig}); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
}
