package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/testsock"
)

type sessionStream = grpc.BidiStreamingServer[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]

// scriptedServer is a Sandboxd whose Session is a per-test script.
type scriptedServer struct {
	sandboxdv1grpc.UnimplementedSandboxdServer
	session func(sessionStream) error
	kill    func(*sandboxdv1.KillRequest) error
	caps    func() (*sandboxdv1.CapabilitiesReport, error)
}

func (s *scriptedServer) Session(stream sessionStream) error { return s.session(stream) }

func (s *scriptedServer) List(context.Context, *sandboxdv1.ListRequest) (*sandboxdv1.ListResponse, error) {
	return &sandboxdv1.ListResponse{Sessions: []*sandboxdv1.SessionInfo{{Id: "s1", State: sandboxdv1.State_RUNNING}}}, nil
}

func (s *scriptedServer) Inspect(_ context.Context, req *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
	if req.GetId() != "s1" {
		return nil, status.Errorf(codes.NotFound, "no session %q", req.GetId())
	}
	return &sandboxdv1.SessionInfo{Id: "s1", Argv: []string{"true"}}, nil
}

func (s *scriptedServer) Capabilities(context.Context, *sandboxdv1.CapabilitiesRequest) (*sandboxdv1.CapabilitiesReport, error) {
	return s.caps()
}

func (s *scriptedServer) Kill(_ context.Context, req *sandboxdv1.KillRequest) (*sandboxdv1.KillResponse, error) {
	return &sandboxdv1.KillResponse{}, s.kill(req)
}

// cuttableListener remembers accepted connections so a test can drop them
// the way a killed daemon would, without any goodbye on the stream.
type cuttableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cuttableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cuttableListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

func serve(t *testing.T, srv *scriptedServer) (string, *cuttableListener) {
	t.Helper()
	ln, sock := testsock.Listen(t)
	cl := &cuttableListener{Listener: ln}
	gs := grpc.NewServer()
	sandboxdv1grpc.RegisterSandboxdServer(gs, srv)
	go gs.Serve(cl)
	t.Cleanup(gs.Stop)
	return sock, cl
}

func dial(t *testing.T, sock string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func recvStart(stream sessionStream) (*sandboxdv1.Start, error) {
	req, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if req.GetStart() == nil {
		return nil, status.Error(codes.InvalidArgument, "first message is not Start")
	}
	return req.GetStart(), nil
}

func started(id string) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: id, PolicyDigest: "d1"}}}
}

func output(s sandboxdv1.Output_Stream, data string) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: &sandboxdv1.Output{Stream: s, Data: []byte(data)}}}
}

func exit(e *sandboxdv1.Exit) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: e}}
}

func runStart(argv ...string) *sandboxdv1.Start {
	return &sandboxdv1.Start{Policy: &sandboxdv1.Policy{}, Command: &sandboxdv1.Command{Argv: argv}}
}

func TestRunForwardsStdinThenEOF(t *testing.T) {
	sawEOF := make(chan bool, 1)
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		start, err := recvStart(stream)
		if err != nil {
			return err
		}
		if got := strings.Join(start.GetCommand().GetArgv(), " "); got != "cat -n" {
			return status.Errorf(codes.InvalidArgument, "argv %q", got)
		}
		if err := stream.Send(started("abc")); err != nil {
			return err
		}
		// Echo stdin back, as cat would, until the client closes it.
		for {
			req, err := stream.Recv()
			if err != nil {
				return err
			}
			in := req.GetStdin()
			if in.GetEof() {
				sawEOF <- true
				break
			}
			if err := stream.Send(output(sandboxdv1.Output_STDOUT, string(in.GetData()))); err != nil {
				return err
			}
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 3}))
	}})
	c := dial(t, sock)
	var stdout bytes.Buffer
	res, err := c.Run(context.Background(), RunOptions{
		Start:  runStart("cat", "-n"),
		Stdin:  strings.NewReader("hello, sandbox"),
		Stdout: &stdout,
	})
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "hello, sandbox" {
		t.Errorf("stdout = %q", stdout.String())
	}
	if res.SessionID != "abc" || res.Digest != "d1" {
		t.Errorf("result = %+v", res)
	}
	if code := ExitCode(res, err); code != 3 {
		t.Errorf("ExitCode = %d, want 3", code)
	}
	select {
	case <-sawEOF:
	default:
		t.Error("server never saw stdin EOF")
	}
}

// killRecorder is a scripted server whose Kill RPC hands each request to
// the returned channel, where signals from Run arrive.
func killRecorder() (*scriptedServer, <-chan *sandboxdv1.KillRequest) {
	killed := make(chan *sandboxdv1.KillRequest, 1)
	return &scriptedServer{kill: func(req *sandboxdv1.KillRequest) error {
		killed <- req
		return nil
	}}, killed
}

func TestRunForwardsSignalsAndResizes(t *testing.T) {
	srv, killed := killRecorder()
	srv.session = func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		if err := stream.Send(started("sig")); err != nil {
			return err
		}
		var gotResize, gotEOF bool
		for !gotResize || !gotEOF {
			req, err := stream.Recv()
			if err != nil {
				return err
			}
			switch {
			case req.GetStdin().GetEof():
				gotEOF = true
			case req.GetResize() != nil:
				gotResize = req.GetResize().GetRows() == 40 && req.GetResize().GetCols() == 100
			}
		}
		k := <-killed
		if k.GetId() != "sig" || k.GetSignal() != 15 {
			return status.Errorf(codes.InvalidArgument, "kill %v", k)
		}
		if err := stream.Send(output(sandboxdv1.Output_STDERR, "got signal\n")); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: 15}))
	}
	sock, _ := serve(t, srv)
	c := dial(t, sock)
	signals := make(chan int32, 1)
	resize := make(chan WindowSize, 1)
	signals <- 15
	resize <- WindowSize{Rows: 40, Cols: 100}
	var stderr bytes.Buffer
	res, err := c.Run(context.Background(), RunOptions{
		Start:   runStart("sleep", "100"),
		Stderr:  &stderr,
		Signals: signals,
		Resize:  resize,
	})
	if err != nil {
		t.Fatal(err)
	}
	if stderr.String() != "got signal\n" {
		t.Errorf("stderr = %q", stderr.String())
	}
	if code := ExitCode(res, err); code != 128+15 {
		t.Errorf("ExitCode = %d, want 143", code)
	}
}

// endless is stdin that never ends and never blocks.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'y'
	}
	return len(p), nil
}

func TestSignalGetsThroughAStalledStream(t *testing.T) {
	srv, killed := killRecorder()
	srv.session = func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		if err := stream.Send(started("stalled")); err != nil {
			return err
		}
		// Like a command that never reads its input: the stream is not read
		// again, so flow control stops the client's stdin.
		select {
		case k := <-killed:
			return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: k.GetSignal()}))
		case <-time.After(10 * time.Second):
			return status.Error(codes.DeadlineExceeded, "no signal arrived while stdin was stalled")
		}
	}
	sock, _ := serve(t, srv)
	c := dial(t, sock)
	signals := make(chan int32, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		signals <- 2
	}()
	res, err := c.Run(context.Background(), RunOptions{Start: runStart("sleep", "100"), Stdin: endless{}, Signals: signals})
	if err != nil {
		t.Fatal(err)
	}
	if code := ExitCode(res, err); code != 128+2 {
		t.Errorf("ExitCode = %d, want 130", code)
	}
}

func TestRunFailedToStartIsAResultNotAnError(t *testing.T) {
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_FAILED_TO_START, ExitCode: 127, Reason: "exec nope: no such file"}))
	}})
	c := dial(t, sock)
	res, err := c.Run(context.Background(), RunOptions{Start: runStart("nope")})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "" {
		t.Errorf("SessionID = %q without Started", res.SessionID)
	}
	if code := ExitCode(res, err); code != 127 {
		t.Errorf("ExitCode = %d, want 127", code)
	}
}

func TestRunRefusalKeepsUnenforceableDetail(t *testing.T) {
	want := &sandboxdv1.Unenforceable{Field: "network.mode", Mechanism: "network namespace", Errno: "EPERM (operation not permitted)", Probe: "unshare(CLONE_NEWNET)"}
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		st, err := status.New(codes.FailedPrecondition, "cannot enforce network.mode").WithDetails(want)
		if err != nil {
			return err
		}
		return st.Err()
	}})
	c := dial(t, sock)
	res, err := c.Run(context.Background(), RunOptions{Start: runStart("true")})
	if err == nil {
		t.Fatalf("Run succeeded: %+v", res)
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("code = %v, want FailedPrecondition (err %v)", status.Code(err), err)
	}
	got := UnenforceableFrom(err)
	if got.GetField() != want.Field || got.GetProbe() != want.Probe || got.GetErrno() != want.Errno {
		t.Errorf("UnenforceableFrom = %v, want %v", got, want)
	}
	if strings.Contains(err.Error(), "rpc error") {
		t.Errorf("message %q buries the reason in grpc framing", err)
	}
	if code := ExitCode(res, err); code != 125 {
		t.Errorf("ExitCode = %d, want 125", code)
	}
}

func TestRunInvalidArgumentKeepsCode(t *testing.T) {
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		return status.Error(codes.InvalidArgument, "filesystem.write[0]: not absolute")
	}})
	c := dial(t, sock)
	_, err := c.Run(context.Background(), RunOptions{Start: runStart("true")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "filesystem.write[0]: not absolute") {
		t.Errorf("err = %v (code %v)", err, status.Code(err))
	}
	if UnenforceableFrom(err) != nil {
		t.Error("UnenforceableFrom found a detail that was not sent")
	}
}

func TestRunDaemonKilledMidSession(t *testing.T) {
	var ln *cuttableListener
	var sock string
	sock, ln = serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		if err := stream.Send(started("doomed")); err != nil {
			return err
		}
		if err := stream.Send(output(sandboxdv1.Output_STDOUT, "partial")); err != nil {
			return err
		}
		// Let the output reach the client before the connection drops.
		time.Sleep(50 * time.Millisecond)
		ln.cut()
		<-stream.Context().Done()
		return stream.Context().Err()
	}})
	c := dial(t, sock)
	var stdout bytes.Buffer
	res, err := c.Run(context.Background(), RunOptions{Start: runStart("sleep", "1000"), Stdout: &stdout})
	if !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("err = %v, want ErrDaemonGone", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "doomed") || !strings.Contains(err.Error(), sock) {
		t.Errorf("message %q does not name the session and socket", err)
	}
	if stdout.String() != "partial" {
		t.Errorf("stdout = %q", stdout.String())
	}
	if code := ExitCode(res, err); code != 125 {
		t.Errorf("ExitCode = %d, want 125", code)
	}
}

func TestRunStreamEndsWithoutExit(t *testing.T) {
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		return stream.Send(started("noexit"))
	}})
	c := dial(t, sock)
	res, err := c.Run(context.Background(), RunOptions{Start: runStart("true")})
	if !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("err = %v, want ErrDaemonGone", err)
	}
	t.Log(err)
	if code := ExitCode(res, err); code != 125 {
		t.Errorf("ExitCode = %d, want 125", code)
	}
}

func TestRunOutputWriteErrorEndsSession(t *testing.T) {
	cancelled := make(chan struct{})
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		if err := stream.Send(started("w")); err != nil {
			return err
		}
		if err := stream.Send(output(sandboxdv1.Output_STDOUT, "x")); err != nil {
			return err
		}
		<-stream.Context().Done()
		close(cancelled)
		return nil
	}})
	c := dial(t, sock)
	_, err := c.Run(context.Background(), RunOptions{Start: runStart("yes"), Stdout: failingWriter{}})
	if err == nil || !strings.Contains(err.Error(), "writing STDOUT") {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Error("the daemon was not told that the client gave up")
	}
}

// A session's call tells the daemon that this client takes Output messages
// of 128 KiB (the daemon's threshold for sending them), and it takes one.
func TestRunTakesLargeOutputMessages(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (128<<10-16)/16)
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		md, _ := metadata.FromIncomingContext(stream.Context())
		v := md.Get("sandboxd-output-message-max")
		if n, err := strconv.Atoi(strings.Join(v, ",")); err != nil || n < 128<<10 {
			return status.Errorf(codes.FailedPrecondition, "sandboxd-output-message-max is %q", v)
		}
		if _, err := recvStart(stream); err != nil {
			return err
		}
		if err := stream.Send(started("big")); err != nil {
			return err
		}
		if err := stream.Send(output(sandboxdv1.Output_STDOUT, string(data))); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{}))
	}})
	var out bytes.Buffer
	if _, err := dial(t, sock).Run(context.Background(), RunOptions{Start: runStart("yes"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Errorf("received %d bytes, want the %d sent", out.Len(), len(data))
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestDialNoDaemon(t *testing.T) {
	addrs := map[string]string{"missing": testsock.Missing(t)}
	maps.Copy(addrs, staleSockets(t))
	for name, sock := range addrs {
		t.Run(name, func(t *testing.T) {
			begin := time.Now()
			_, err := Dial(context.Background(), sock)
			if err == nil {
				t.Fatal("Dial succeeded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "no sandboxd listening") {
				t.Errorf("error %q does not say nothing listens on the socket", err)
			}
			if d := time.Since(begin); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// notSandboxdListeners are two sockets a daemon is not on: junk answers
// in HTTP/1 and hangs up, silent accepts and never says a word.
func notSandboxdListeners(t *testing.T) (junk, silent string) {
	t.Helper()
	listen := func(handle func(net.Conn)) string {
		ln, sock := testsock.Listen(t)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go handle(c)
			}
		}()
		return sock
	}
	junk = listen(func(c net.Conn) {
		c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
		c.Close()
	})
	var silentMu sync.Mutex
	var silentConns []net.Conn
	t.Cleanup(func() {
		silentMu.Lock()
		defer silentMu.Unlock()
		for _, c := range silentConns {
			c.Close()
		}
	})
	silent = listen(func(c net.Conn) {
		silentMu.Lock()
		silentConns = append(silentConns, c)
		silentMu.Unlock()
	})
	return junk, silent
}

func TestDialNotSandboxd(t *testing.T) {
	junk, silent := notSandboxdListeners(t)
	for _, tc := range []struct {
		name, sock, want string
		timeout          time.Duration
	}{
		{"speaks something else", junk, "does not speak sandboxd", HandshakeTimeout},
		{"never answers", silent, "did not answer as sandboxd", 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			begin := time.Now()
			_, err := Dial(ctx, tc.sock)
			if err == nil {
				t.Fatal("Dial succeeded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.sock) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the socket and %q", err, tc.want)
			}
			if d := time.Since(begin); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestOtherGRPCServerIsNotSandboxd: Dial spends no call on telling a gRPC
// server that is not sandboxd apart, so the first call of every kind
// (unary, a session stream, a server stream, the layers service) says so.
func TestOtherGRPCServerIsNotSandboxd(t *testing.T) {
	ln, sock := testsock.Listen(t)
	gs := grpc.NewServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	for name, call := range map[string]func() error{
		"list": func() error { _, err := c.List(ctx); return err },
		"run": func() error {
			_, err := c.Run(ctx, RunOptions{Start: runStart("true")})
			return err
		},
		"attach": func() error {
			_, err := c.Attach(ctx, AttachOptions{ID: "s1", ReadOnly: true})
			return err
		},
		"watch": func() error {
			return c.Watch(ctx, &sandboxdv1.WatchRequest{}, func(*sandboxdv1.Event) error { return nil })
		},
		"layers": func() error { _, err := c.Layers(ctx); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "is a gRPC server but not sandboxd") {
				t.Errorf("error %v: want the socket and that it is not sandboxd", err)
			}
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("code %v, want Unimplemented", status.Code(err))
			}
		})
	}
}

// TestSandboxdsOwnUnimplementedIsItsOwn: sandboxd answers Unimplemented
// too (a signal its OS cannot deliver), and that is not taken for a
// server that is not sandboxd, even as the connection's first call.
func TestSandboxdsOwnUnimplementedIsItsOwn(t *testing.T) {
	sock, _ := serve(t, &scriptedServer{kill: func(*sandboxdv1.KillRequest) error {
		return status.Error(codes.Unimplemented, "signal 10: not supported on windows")
	}})
	c := dial(t, sock)
	err := c.Kill(context.Background(), "s1", 10)
	if status.Code(err) != codes.Unimplemented || err.Error() != "kill s1: signal 10: not supported on windows" {
		t.Errorf("Kill = %v (code %v), want the daemon's own Unimplemented", err, status.Code(err))
	}
}

// TestDialConnectsOnce: the connection Dial makes to check the socket is
// the one the calls go over, also when the first call comes later.
func TestDialConnectsOnce(t *testing.T) {
	sock, ln := serve(t, &scriptedServer{})
	c := dial(t, sock)
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if n := len(ln.conns); n != 1 {
		t.Errorf("%d connections accepted, want 1", n)
	}
}

func TestListInspectKill(t *testing.T) {
	var killed *sandboxdv1.KillRequest
	sock, _ := serve(t, &scriptedServer{kill: func(req *sandboxdv1.KillRequest) error {
		if req.GetId() != "s1" {
			return status.Errorf(codes.NotFound, "no session %q", req.GetId())
		}
		killed = req
		return nil
	}})
	c := dial(t, sock)
	ctx := context.Background()
	sessions, err := c.List(ctx)
	if err != nil || len(sessions) != 1 || sessions[0].GetId() != "s1" {
		t.Errorf("List = %v, %v", sessions, err)
	}
	info, err := c.Inspect(ctx, "s1")
	if err != nil || info.GetArgv()[0] != "true" {
		t.Errorf("Inspect = %v, %v", info, err)
	}
	_, err = c.Inspect(ctx, "nope")
	if status.Code(err) != codes.NotFound || err.Error() != `inspect nope: no session "nope"` {
		t.Errorf("Inspect(nope) err = %v (code %v)", err, status.Code(err))
	}
	if err := c.Kill(ctx, "s1", 15); err != nil || killed.GetSignal() != 15 {
		t.Errorf("Kill = %v, request %v", err, killed)
	}
	if err := c.Kill(ctx, "nope", 0); status.Code(err) != codes.NotFound {
		t.Errorf("Kill(nope) = %v", err)
	}
}

func TestCapabilities(t *testing.T) {
	var fail atomic.Bool
	sock, _ := serve(t, &scriptedServer{caps: func() (*sandboxdv1.CapabilitiesReport, error) {
		if fail.Load() {
			return nil, status.Error(codes.Unavailable, "busy")
		}
		return &sandboxdv1.CapabilitiesReport{Backend: "linux", SelfTest: &sandboxdv1.SelfTest{Passed: true}}, nil
	}})
	c := dial(t, sock)
	r, err := c.Capabilities(context.Background())
	if err != nil || r.GetBackend() != "linux" || !r.GetSelfTest().GetPassed() {
		t.Errorf("Capabilities = %v, %v", r, err)
	}
	fail.Store(true)
	if _, err := c.Capabilities(context.Background()); status.Code(err) != codes.Unavailable || err.Error() != "capabilities: busy" {
		t.Errorf("Capabilities error = %v (code %v)", err, status.Code(err))
	}
}

func TestRunDetachReturnsAtStarted(t *testing.T) {
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		start, err := recvStart(stream)
		if err != nil {
			return err
		}
		if !start.GetDetach() {
			return status.Error(codes.InvalidArgument, "not detached")
		}
		// As the daemon does: Started, then the stream ends with OK.
		return stream.Send(started("det"))
	}})
	c := dial(t, sock)
	start := runStart("sleep", "100")
	start.Detach = true
	stdin := &recordingReader{}
	res, err := c.Run(context.Background(), RunOptions{Start: start, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "det" || res.Digest != "d1" || res.Exit != nil || !res.Detached {
		t.Errorf("result = %+v", res)
	}
	if code := ExitCode(res, err); code != 0 {
		t.Errorf("ExitCode = %d, want 0", code)
	}
	if stdin.read.Load() {
		t.Error("a detached Run read stdin")
	}
}

func TestRunDetachCommandNotFound(t *testing.T) {
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_FAILED_TO_START, ExitCode: 127, Reason: "exec nope: no such file"}))
	}})
	c := dial(t, sock)
	start := runStart("nope")
	start.Detach = true
	res, err := c.Run(context.Background(), RunOptions{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	if res.Detached || ExitCode(res, err) != 127 {
		t.Errorf("result = %+v, ExitCode %d; want 127", res, ExitCode(res, err))
	}
}

// recordingReader is stdin that yields "secret" and remembers being read.
type recordingReader struct{ read atomic.Bool }

func (r *recordingReader) Read(p []byte) (int, error) {
	r.read.Store(true)
	return copy(p, "secret"), io.EOF
}

func recvAttach(stream sessionStream) (*sandboxdv1.Attach, error) {
	req, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if req.GetAttach() == nil {
		return nil, status.Error(codes.InvalidArgument, "first message is not Attach")
	}
	return req.GetAttach(), nil
}

func TestAttachReplaysThenStreamsLive(t *testing.T) {
	live := make(chan struct{})
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		att, err := recvAttach(stream)
		if err != nil {
			return err
		}
		if att.GetId() != "w1" || !att.GetReadOnly() {
			return status.Errorf(codes.InvalidArgument, "attach %v", att)
		}
		for _, r := range []*sandboxdv1.SessionResponse{
			started("w1"),
			output(sandboxdv1.Output_STDOUT, "old out\n"),
			output(sandboxdv1.Output_STDERR, "old err\n"),
		} {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		<-live
		if err := stream.Send(output(sandboxdv1.Output_STDOUT, "new out\n")); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 4}))
	}})
	c := dial(t, sock)
	stdout := &notifyingBuffer{want: "old out\n", reached: live}
	var stderr bytes.Buffer
	res, err := c.Attach(context.Background(), AttachOptions{ID: "w1", ReadOnly: true, Stdout: stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); got != "old out\nnew out\n" || stderr.String() != "old err\n" {
		t.Errorf("stdout %q, stderr %q", got, stderr.String())
	}
	if res.SessionID != "w1" || res.Digest != "d1" || res.Detached {
		t.Errorf("result = %+v", res)
	}
	if code := ExitCode(res, err); code != 4 {
		t.Errorf("ExitCode = %d, want 4", code)
	}
}

// AttachOptions.OmitEnforcement reaches the daemon, in every kind of
// attach, and an attach without it asks for the report as before.
func TestAttachAsksForTheReportUnlessOmitted(t *testing.T) {
	for _, omit := range []bool{false, true} {
		for _, opts := range []AttachOptions{{ReadOnly: true}, {ReplayOnly: true}, {}} {
			srv := &scriptedServer{session: func(stream sessionStream) error {
				att, err := recvAttach(stream)
				if err != nil {
					return err
				}
				if att.GetOmitEnforcement() != omit {
					return status.Errorf(codes.InvalidArgument, "attach %v", att)
				}
				st := started("e1")
				if !omit {
					st.GetStarted().Enforcement = &sandboxdv1.EnforcementReport{Backend: "b"}
				}
				if err := stream.Send(st); err != nil {
					return err
				}
				return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED}))
			}}
			sock, _ := serve(t, srv)
			opts.ID, opts.OmitEnforcement = "e1", omit
			res, err := dial(t, sock).Attach(context.Background(), opts)
			if err != nil {
				t.Fatalf("%+v: %v", opts, err)
			}
			if got := res.Enforcement.GetBackend(); got != map[bool]string{false: "b", true: ""}[omit] {
				t.Errorf("%+v: Result.Enforcement %v", opts, res.Enforcement)
			}
		}
	}
}

// notifyingBuffer closes reached once its content is want, so that a
// scripted daemon sends live output only after the client has the replay.
type notifyingBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	want    string
	reached chan struct{}
}

func (b *notifyingBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.buf.String() == b.want {
		close(b.reached)
	}
	return n, err
}

func (b *notifyingBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestAttachSendsNothingAfterAttach(t *testing.T) {
	for _, tc := range []struct {
		name       string
		readOnly   bool
		stdin      *recordingReader
		wantWindow bool
	}{
		// A read-only client does not even read its stdin, and sends no
		// resizes or signals.
		{"read-only", true, &recordingReader{}, false},
		// An interactive client without stdin leaves the session's stdin
		// open: no EOF.
		{"interactive without stdin", false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, killed := killRecorder()
			got := make(chan *sandboxdv1.SessionRequest, 8)
			srv.session = func(stream sessionStream) error {
				att, err := recvAttach(stream)
				if err != nil {
					return err
				}
				if att.GetReadOnly() != tc.readOnly || (att.GetWindow() != nil) != tc.wantWindow {
					return status.Errorf(codes.InvalidArgument, "attach %v", att)
				}
				if err := stream.Send(started("ro")); err != nil {
					return err
				}
				go func() {
					for {
						req, err := stream.Recv()
						if err != nil {
							return
						}
						got <- req
					}
				}()
				// Long enough for what the client has ready (stdin, EOF,
				// a resize, a signal) to arrive, were it sent.
				time.Sleep(300 * time.Millisecond)
				return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED}))
			}
			sock, _ := serve(t, srv)
			c := dial(t, sock)
			opts := AttachOptions{ID: "ro", ReadOnly: tc.readOnly, Window: &WindowSize{Rows: 1, Cols: 2}}
			if tc.readOnly {
				signals := make(chan int32, 1)
				resize := make(chan WindowSize, 1)
				signals <- 2
				resize <- WindowSize{Rows: 10, Cols: 20}
				opts.Stdin, opts.Signals, opts.Resize = tc.stdin, signals, resize
			}
			res, err := c.Attach(context.Background(), opts)
			if err != nil || res.Exit == nil {
				t.Fatalf("Attach = %+v, %v", res, err)
			}
			select {
			case req := <-got:
				t.Errorf("the client sent %v after Attach", req)
			case k := <-killed:
				t.Errorf("the client sent signal %v", k)
			default:
			}
			if tc.stdin != nil && tc.stdin.read.Load() {
				t.Error("stdin was read")
			}
		})
	}
}

func TestAttachInteractiveForwardsStdinEOFAndSignals(t *testing.T) {
	srv, killed := killRecorder()
	srv.session = func(stream sessionStream) error {
		att, err := recvAttach(stream)
		if err != nil {
			return err
		}
		if att.GetReadOnly() || att.GetWindow().GetRows() != 30 || att.GetWindow().GetCols() != 90 {
			return status.Errorf(codes.InvalidArgument, "attach %v", att)
		}
		if err := stream.Send(started("i1")); err != nil {
			return err
		}
		var in []byte
		for {
			req, err := stream.Recv()
			if err != nil {
				return err
			}
			in = append(in, req.GetStdin().GetData()...)
			if req.GetStdin().GetEof() {
				break
			}
		}
		k := <-killed
		if k.GetId() != "i1" || k.GetSignal() != 15 {
			return status.Errorf(codes.InvalidArgument, "kill %v", k)
		}
		if err := stream.Send(output(sandboxdv1.Output_STDOUT, "got "+string(in))); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: 15}))
	}
	sock, _ := serve(t, srv)
	c := dial(t, sock)
	signals := make(chan int32, 1)
	signals <- 15
	var stdout bytes.Buffer
	res, err := c.Attach(context.Background(), AttachOptions{
		ID:      "i1",
		Stdin:   strings.NewReader("line\n"),
		Stdout:  &stdout,
		Signals: signals,
		Window:  &WindowSize{Rows: 30, Cols: 90},
	})
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "got line\n" {
		t.Errorf("stdout = %q", stdout.String())
	}
	if code := ExitCode(res, err); code != 128+15 {
		t.Errorf("ExitCode = %d, want 143", code)
	}
}

// detachingReader yields data, then ErrDetach.
type detachingReader struct{ data []byte }

func (r *detachingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, ErrDetach
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestAttachDetachLeavesWithoutEOF(t *testing.T) {
	type seen struct {
		in  string
		eof bool
	}
	left := make(chan seen, 1)
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvAttach(stream); err != nil {
			return err
		}
		if err := stream.Send(started("d1")); err != nil {
			return err
		}
		var s seen
		for {
			req, err := stream.Recv()
			if err != nil {
				// The client went away without a word, the session runs on.
				left <- s
				return err
			}
			s.in += string(req.GetStdin().GetData())
			s.eof = s.eof || req.GetStdin().GetEof()
		}
	}})
	c := dial(t, sock)
	res, err := c.Attach(context.Background(), AttachOptions{ID: "d1", Stdin: &detachingReader{data: []byte("ls\r")}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Detached || res.Exit != nil || res.SessionID != "d1" {
		t.Errorf("result = %+v", res)
	}
	if code := ExitCode(res, err); code != 0 {
		t.Errorf("ExitCode = %d, want 0", code)
	}
	select {
	case s := <-left:
		if s.in != "ls\r" || s.eof {
			t.Errorf("daemon saw stdin %q, eof %v; want %q and no EOF", s.in, s.eof, "ls\r")
		}
	case <-time.After(5 * time.Second):
		t.Error("the stream did not end after detaching")
	}
}

func TestAttachRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   *status.Status
		want string
	}{
		{"interactive taken", status.New(codes.FailedPrecondition, "session x already has an interactive client (attach read-only instead)"),
			"attach x: session x already has an interactive client (attach read-only instead)"},
		{"not found", status.New(codes.NotFound, `no session "x"`), `attach x: no session "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
				if _, err := recvAttach(stream); err != nil {
					return err
				}
				return tc.st.Err()
			}})
			c := dial(t, sock)
			res, err := c.Attach(context.Background(), AttachOptions{ID: "x", Stdin: strings.NewReader("input")})
			if status.Code(err) != tc.st.Code() || err.Error() != tc.want {
				t.Errorf("err = %v (code %v); want %q", err, status.Code(err), tc.want)
			}
			if code := ExitCode(res, err); code != 125 {
				t.Errorf("ExitCode = %d, want 125", code)
			}
		})
	}
}

// TestMethodNamesAreTheServices: the client names each method itself,
// without the generated gRPC code; the names are the services' own.
func TestMethodNamesAreTheServices(t *testing.T) {
	for got, want := range map[string]string{
		methodSession:      sandboxdv1grpc.Sandboxd_Session_FullMethodName,
		methodList:         sandboxdv1grpc.Sandboxd_List_FullMethodName,
		methodInspect:      sandboxdv1grpc.Sandboxd_Inspect_FullMethodName,
		methodKill:         sandboxdv1grpc.Sandboxd_Kill_FullMethodName,
		methodCapabilities: sandboxdv1grpc.Sandboxd_Capabilities_FullMethodName,
		methodWatch:        sandboxdv1grpc.Sandboxd_Watch_FullMethodName,
		methodListLayers:   sandboxdv1grpc.Layers_ListLayers_FullMethodName,
		methodDiff:         sandboxdv1grpc.Layers_Diff_FullMethodName,
		methodCommit:       sandboxdv1grpc.Layers_Commit_FullMethodName,
		methodDiscard:      sandboxdv1grpc.Layers_Discard_FullMethodName,
	} {
		if got != want {
			t.Errorf("the client calls %s, the service's method is %s", got, want)
		}
	}
}
