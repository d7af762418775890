package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/grpcconn"
)

// WindowSize is a terminal size in character cells.
type WindowSize struct {
	Rows, Cols uint32
}

// ErrDetach, returned or wrapped by a session's Stdin, makes the client
// leave the session without ending it: nothing more is sent, not even
// EOF, and Run or Attach returns a Result with Detached set. A session
// started without Start.Detach still ends, since the daemon ends such a
// session with its starting stream.
var ErrDetach = errors.New("detached from the session")

// RunOptions says what to start and where its stdio goes.
type RunOptions struct {
	// Start is the first message of the session: policy, command, tty and
	// the initial window size. With Start.Detach, Run returns once the
	// daemon has started the session and let go of it; Stdin, Resize and
	// Signals are then not used.
	Start *sandboxdv1.Start
	// Stdin is forwarded to the process once the session has started; at
	// its end (EOF or a read error other than ErrDetach) the process's
	// stdin is closed. Nil closes it at once. A Read blocked when the
	// session ends is left behind: Run does not wait for it.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it. A
	// write error ends the session.
	Stdout, Stderr io.Writer
	// Resize carries terminal size changes of a tty session.
	Resize <-chan WindowSize
	// Signals carries signals to deliver to the process, as Linux signal
	// numbers (the wire numbering on every OS).
	Signals <-chan int32
	// OnStarted, when set, is called with the session's id once the
	// daemon has started it, before any output: a supervisor can inspect
	// or watch the session while Run is still waiting for its end.
	OnStarted func(id string)
}

// AttachOptions says which session to join and how.
type AttachOptions struct {
	// ID is the session to attach to.
	ID string
	// ReadOnly only watches: Stdin, Resize, Signals and Window are not
	// used, and nothing is sent after the Attach message, so any number
	// of read-only clients may watch. Otherwise the client is the
	// session's one interactive client, and the daemon refuses it
	// (FailedPrecondition) while another one is.
	ReadOnly bool
	// ReplayOnly, read-only too, writes only the output the daemon kept:
	// Attach returns after it, with the Exit of a session that has ended
	// and Detached set for one still running.
	ReplayOnly bool
	// Stdin is forwarded to the process as in RunOptions, except that a
	// nil Stdin sends nothing and leaves the process's stdin open.
	Stdin io.Reader
	// Stdout and Stderr receive the scrollback the daemon kept, then the
	// live output; nil discards it. A write error ends the attach.
	Stdout, Stderr io.Writer
	// Resize and Signals are as in RunOptions.
	Resize  <-chan WindowSize
	Signals <-chan int32
	// Window is the client's terminal size for a tty session; nil leaves
	// the session's as it is.
	Window *WindowSize
	// OmitEnforcement asks the daemon to leave the enforcement report
	// out of Started (Attach.omit_enforcement), for a caller that does
	// not show it; Result.Enforcement is then nil.
	OmitEnforcement bool
}

// Result is how a session ended, or how the client left it.
type Result struct {
	// SessionID, Digest and Enforcement come from Started; they are empty
	// when the command failed to start, and Enforcement is nil when the
	// Start set OmitEnforcement or the attach asked for it to be omitted.
	SessionID   string
	Digest      string
	Enforcement *sandboxdv1.EnforcementReport
	// Exit is the session's one Exit message; nil when the client left a
	// session that was still running (Detached).
	Exit *sandboxdv1.Exit
	// Detached is set when the client left the session without its Exit:
	// Start.Detach, or ErrDetach from Stdin.
	Detached bool
}

// Run starts one session and runs it to its Exit, or, with Start.Detach,
// until the daemon has started it. The error is non-nil when the daemon
// refused the session (its gRPC status is kept: see UnenforceableFrom),
// the connection broke before Exit (the error wraps ErrDaemonGone), ctx
// ended, or writing output failed. A command that could not be executed is
// not an error: it is a Result whose Exit has state FAILED_TO_START.
func (c *Client) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	if opts.Start == nil {
		return nil, errors.New("run: RunOptions.Start is nil")
	}
	sc := sessionCall{
		first:  &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: opts.Start}},
		op:     "start session",
		before: "before the session started",
		stdout: opts.Stdout,
		stderr: opts.Stderr,
	}
	if opts.Start.GetDetach() {
		// The daemon ends the stream right after Started.
		sc.detach = true
	} else {
		sc.stdin = opts.Stdin
		if sc.stdin == nil {
			sc.stdin = strings.NewReader("")
		}
		sc.resize = opts.Resize
		sc.signals = opts.Signals
	}
	sc.onStarted = opts.OnStarted
	return c.session(ctx, sc)
}

// Attach joins a running or ended session: it writes the output the
// daemon kept, then the live output, and returns at the session's Exit
// (at once for a session that has already ended) or when Stdin returns
// ErrDetach. Errors are as for Run; an unknown session, or one outside
// this caller's view, is NotFound.
func (c *Client) Attach(ctx context.Context, opts AttachOptions) (*Result, error) {
	if opts.ID == "" {
		return nil, errors.New("attach: AttachOptions.ID is empty")
	}
	att := &sandboxdv1.Attach{
		Id:              opts.ID,
		ReadOnly:        opts.ReadOnly || opts.ReplayOnly,
		ReplayOnly:      opts.ReplayOnly,
		OmitEnforcement: opts.OmitEnforcement,
	}
	sc := sessionCall{
		// The daemon ends a replay's stream after the scrollback.
		detach: opts.ReplayOnly,
		first:  &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Attach{Attach: att}},
		op:     "attach " + opts.ID,
		before: "before attaching to session " + opts.ID,
		stdout: opts.Stdout,
		stderr: opts.Stderr,
	}
	if !att.ReadOnly {
		if w := opts.Window; w != nil {
			att.Window = &sandboxdv1.WindowSize{Rows: w.Rows, Cols: w.Cols}
		}
		sc.stdin = opts.Stdin
		sc.resize = opts.Resize
		sc.signals = opts.Signals
	}
	return c.session(ctx, sc)
}

// sessionCall is one Session stream as Run or Attach sets it up. Nil
// stdin, resize or signals send nothing of that kind.
type sessionCall struct {
	first *sandboxdv1.SessionRequest
	// op names the call in errors before Started; before says when the
	// daemon went away in that phase.
	op, before string
	// detach: the daemon ends the stream after Started, and that is
	// success rather than a lost daemon.
	detach         bool
	stdin          io.Reader
	stdout, stderr io.Writer
	resize         <-chan WindowSize
	signals        <-chan int32
	onStarted      func(id string)
}

// session runs sc, again after a delay while the daemon refuses it with a
// retry hint (ResourceExhausted with a RetryInfo, before any answer:
// nothing was started) or, on a client from Connect, closes its connection
// unanswered, for at most DialTimeout.
func (c *Client) session(ctx context.Context, sc sessionCall) (*Result, error) {
	begin := time.Now()
	// No wait between attempts outlasts DialTimeout, whatever a daemon's
	// hint asks: a caller without a deadline would sleep as long as it said.
	waitCtx, cancel := context.WithDeadline(ctx, begin.Add(DialTimeout))
	defer cancel()
	var b backoff
	for {
		res, answered, err := c.sessionOnce(ctx, sc)
		if errors.Is(err, errClosedEarly) {
			if time.Since(begin) > DialTimeout || !b.wait(waitCtx, nil) {
				return res, closedEarly(c.socket, time.Since(begin))
			}
			continue
		}
		if err == nil || answered || time.Since(begin) > DialTimeout {
			return res, err
		}
		st := status.Convert(err)
		if retryHint(st) == 0 || !b.wait(waitCtx, st) {
			return res, err
		}
	}
}

// sessionOnce runs sc on one stream; answered says whether the daemon
// sent anything on it.
func (c *Client) sessionOnce(ctx context.Context, sc sessionCall) (_ *Result, answered bool, _ error) {
	// Cancelling the stream is how the daemon learns that nobody is
	// listening any more, so every early return below ends this client's
	// part (and the session, unless it is detached or attached to).
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := c.connection(sctx)
	if err != nil {
		return nil, false, c.streamError(ctx, sc, conn, "", err)
	}
	stream, err := conn.NewStream(sctx, methodSession)
	if err != nil {
		return nil, false, c.streamError(ctx, sc, conn, "", err)
	}
	s := &sender{stream: stream}
	// A failed Send means the stream is already over; Recv below reports why.
	_ = s.send(sc.first)

	// Closed, before the stream is cancelled, when Stdin asked to detach,
	// so that the cancelled Recv is read as leaving rather than failing.
	detached := make(chan struct{})
	res := &Result{}
	started := false
	for {
		resp := &sandboxdv1.SessionResponse{}
		b, err := stream.RecvBytes()
		if err == nil {
			err = decodeResponse(b, resp)
		}
		if err != nil {
			select {
			case <-detached:
				res.Detached = true
				return res, true, nil
			default:
			}
			if sc.detach && started && errors.Is(err, io.EOF) {
				res.Detached = true
				return res, true, nil
			}
			return nil, answered, c.streamError(ctx, sc, conn, res.SessionID, err)
		}
		answered = true
		switch m := resp.Msg.(type) {
		case *sandboxdv1.SessionResponse_Started:
			if started {
				continue
			}
			started = true
			res.SessionID = m.Started.GetSessionId()
			res.Digest = m.Started.GetPolicyDigest()
			res.Enforcement = m.Started.GetEnforcement()
			if sc.onStarted != nil {
				sc.onStarted(res.SessionID)
			}
			if sc.stdin != nil {
				go func() {
					if s.forwardStdin(sctx, sc.stdin) {
						close(detached)
						cancel()
					}
				}()
			}
			if sc.resize != nil {
				go s.forwardResizes(sctx, sc.resize)
			}
			if sc.signals != nil {
				go c.forwardSignals(sctx, res.SessionID, sc.signals)
			}
		case *sandboxdv1.SessionResponse_Output:
			w := sc.stdout
			if m.Output.GetStream() == sandboxdv1.Output_STDERR {
				w = sc.stderr
			}
			if w == nil {
				continue
			}
			if _, err := w.Write(m.Output.GetData()); err != nil {
				return nil, true, fmt.Errorf("session %s: writing %s: %w", res.SessionID, m.Output.GetStream(), err)
			}
		case *sandboxdv1.SessionResponse_Exit:
			res.Exit = m.Exit
			return res, true, nil
		}
	}
}

// streamError explains why the stream of session id ("" before Started)
// on conn (nil when there was none) ended without an Exit.
func (c *Client) streamError(ctx context.Context, sc sessionCall, conn *grpcconn.Conn, id string, err error) error {
	op, when := sc.op, sc.before
	if id != "" {
		op, when = "session "+id, "before session "+id+" ended"
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if conn != nil && id == "" {
		if herr := c.handshakeError(conn); herr != nil {
			return herr
		}
	}
	if errors.Is(err, io.EOF) {
		st := status.New(codes.Unavailable, "stream ended without an exit status")
		return newRPCError(fmt.Sprintf("%v %s (socket %s): the stream ended without an exit status", ErrDaemonGone, when, c.socket), st, ErrDaemonGone)
	}
	if id == "" {
		if nerr := c.notSandboxd(ctx, err); nerr != nil {
			return nerr
		}
	}
	st := status.Convert(err)
	// Unavailable is a broken connection; Canceled without our ctx being
	// done is the daemon resetting the stream on its way down.
	if st.Code() == codes.Unavailable || st.Code() == codes.Canceled {
		return newRPCError(fmt.Sprintf("%v %s (socket %s): %s", ErrDaemonGone, when, c.socket, st.Message()), st, ErrDaemonGone)
	}
	return newRPCError(fmt.Sprintf("%s: %s", op, st.Message()), st, nil)
}

// sender serializes sends: a stream takes one message at a time, and
// stdin and resizes come from different goroutines.
type sender struct {
	mu     sync.Mutex
	stream *grpcconn.Stream
}

func (s *sender) send(req *sandboxdv1.SessionRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(req)
}

// forwardStdin sends what r yields, then EOF. It reports whether r asked
// to detach, in which case it sends no EOF.
func (s *sender) forwardStdin(ctx context.Context, r io.Reader) (detach bool) {
	buf := make([]byte, 32<<10)
	for ctx.Err() == nil {
		n, err := r.Read(buf)
		if n > 0 {
			if s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Data: buf[:n]}}}) != nil {
				return false
			}
		}
		if errors.Is(err, ErrDetach) {
			return true
		}
		if err != nil {
			break
		}
	}
	if ctx.Err() == nil {
		_ = s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Eof: true}}})
	}
	return false
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
			if err := c.invoke(ctx, methodKill, &sandboxdv1.KillRequest{Id: id, Signal: sig}, &sandboxdv1.KillResponse{}); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
}
