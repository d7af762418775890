package grpcconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

const (
	methodSession = "/sandboxd.v1.Sandboxd/Session"
	methodInspect = "/sandboxd.v1.Sandboxd/Inspect"
	methodWatch   = "/sandboxd.v1.Sandboxd/Watch"
)

type sessionStream = grpc.BidiStreamingServer[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]

// server is a grpc-go server whose handlers each test sets.
type server struct {
	sandboxdv1grpc.UnimplementedSandboxdServer
	session func(sessionStream) error
	inspect func(context.Context, *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error)
	watch   func(*sandboxdv1.WatchRequest, grpc.ServerStreamingServer[sandboxdv1.Event]) error
}

func (s *server) Session(st sessionStream) error { return s.session(st) }
func (s *server) Inspect(ctx context.Context, r *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
	if s.inspect == nil {
		return s.UnimplementedSandboxdServer.Inspect(ctx, r)
	}
	return s.inspect(ctx, r)
}
func (s *server) Watch(r *sandboxdv1.WatchRequest, st grpc.ServerStreamingServer[sandboxdv1.Event]) error {
	return s.watch(r, st)
}

// start serves srv on a real socket and returns a client connection to it.
func start(t testing.TB, srv *server, opts ...grpc.ServerOption) (*Conn, *grpc.Server) {
	t.Helper()
	return startWith(t, srv, Options{Window: 1 << 20, MaxRecvMsgSize: 64 << 20, Authority: "test"}, opts...)
}

// startWith is start with the client's options.
func startWith(t testing.TB, srv *server, copts Options, opts ...grpc.ServerOption) (*Conn, *grpc.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	sandboxdv1grpc.RegisterSandboxdServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := Start(nc, copts)
	t.Cleanup(func() { c.Close() })
	<-c.FirstFrame()
	if err := c.FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c, gs
}

func echoSessions(st sessionStream) error {
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out := &sandboxdv1.Output{Data: req.GetStdin().GetData()}
		if err := st.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: out}}); err != nil {
			return err
		}
	}
}

func stdin(data []byte) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Data: data}}}
}

// TestLargeMessagesBothWays: messages far beyond HTTP/2's 64 KiB initial
// window and the 1 MiB one both sides advertise, each way, against a
// server with grpc-go's default windows and one with sandboxd's.
func TestLargeMessagesBothWays(t *testing.T) {
	for name, opts := range map[string][]grpc.ServerOption{
		"default windows": nil,
		"1 MiB windows":   {grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(1 << 20)},
	} {
		t.Run(name, func(t *testing.T) {
			opts = append(opts, grpc.MaxRecvMsgSize(64<<20))
			c, _ := start(t, &server{session: echoSessions}, opts...)
			ctx := context.Background()
			s, err := c.NewStream(ctx, methodSession)
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{0, 1, 70 << 10, 1 << 20, 5<<20 + 3} {
				data := bytes.Repeat([]byte{byte(size)}, size)
				for i := range data {
					data[i] ^= byte(i / 7)
				}
				if err := s.Send(stdin(data)); err != nil {
					t.Fatalf("send %d bytes: %v", size, err)
				}
				resp := &sandboxdv1.SessionResponse{}
				if err := s.Recv(resp); err != nil {
					t.Fatalf("recv %d bytes: %v", size, err)
				}
				if !bytes.Equal(resp.GetOutput().GetData(), data) {
					t.Fatalf("%d bytes came back as %d different ones", size, len(resp.GetOutput().GetData()))
				}
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if err := s.Recv(&sandboxdv1.SessionResponse{}); !errors.Is(err, io.EOF) {
				t.Fatalf("Recv after the server's end = %v, want io.EOF", err)
			}
		})
	}
}

// TestServerFillsTheWindowUnread: a server sending more than the windows
// hold while the client reads nothing yet is held back, and all of it
// arrives, in order, once the client reads.
func TestServerFillsTheWindowUnread(t *testing.T) {
	const n, size = 40, 100 << 10
	c, _ := start(t, &server{watch: func(_ *sandboxdv1.WatchRequest, st grpc.ServerStreamingServer[sandboxdv1.Event]) error {
		for i := range n {
			if err := st.Send(&sandboxdv1.Event{SessionId: fmt.Sprint(i), Argv: []string{strings.Repeat("x", size)}}); err != nil {
				return err
			}
		}
		return nil
	}})
	s, err := c.NewStream(context.Background(), methodWatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendLast(&sandboxdv1.WatchRequest{}); err != nil {
		t.Fatal(err)
	}
	// What has arrived unread stays within the window advertised.
	for range 50 {
		s.mu.Lock()
		held := s.in.held()
		s.mu.Unlock()
		if held > 1<<20 {
			t.Fatalf("%d bytes held unread, more than the 1 MiB window", held)
		}
		time.Sleep(time.Millisecond)
	}
	for i := range n {
		ev := &sandboxdv1.Event{}
		if err := s.Recv(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.GetSessionId() != fmt.Sprint(i) || len(ev.GetArgv()[0]) != size {
			t.Fatalf("event %d is %q with %d bytes", i, ev.GetSessionId(), len(ev.GetArgv()[0]))
		}
	}
	if err := s.Recv(&sandboxdv1.Event{}); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after the last = %v, want io.EOF", err)
	}
}

// TestManyConcurrentStreams: unary calls and sessions at once on one
// connection each get their own replies.
func TestManyConcurrentStreams(t *testing.T) {
	c, _ := start(t, &server{
		session: echoSessions,
		inspect: func(_ context.Context, r *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
			return &sandboxdv1.SessionInfo{Id: r.GetId()}, nil
		},
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for i := range 200 {
		wg.Go(func() {
			info := &sandboxdv1.SessionInfo{}
			id := fmt.Sprint("s", i)
			if err := c.Invoke(ctx, methodInspect, &sandboxdv1.InspectRequest{Id: id}, info); err != nil {
				errs <- err
			} else if info.GetId() != id {
				errs <- fmt.Errorf("Inspect %s answered %s", id, info.GetId())
			}
		})
	}
	for i := range 50 {
		wg.Go(func() {
			s, err := c.NewStream(ctx, methodSession)
			if err != nil {
				errs <- err
				return
			}
			for j := range 20 {
				data := fmt.Appendf(nil, "%d/%d:%s", i, j, strings.Repeat("y", i*1000))
				if err := s.Send(stdin(data)); err != nil {
					errs <- err
					return
				}
				resp := &sandboxdv1.SessionResponse{}
				if err := s.Recv(resp); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(resp.GetOutput().GetData(), data) {
					errs <- fmt.Errorf("stream %d message %d came back different", i, j)
					return
				}
			}
			if err := s.CloseSend(); err != nil {
				errs <- err
			}
			if err := s.Recv(&sandboxdv1.SessionResponse{}); !errors.Is(err, io.EOF) {
				errs <- fmt.Errorf("stream %d ended with %v", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := openStreams(c); n != 0 {
		t.Errorf("%d streams still open", n)
	}
}

func openStreams(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}

// TestCancelMidStream: cancelling a call's context resets its stream: the
// server's handler sees its context end, the client's Recv returns
// Canceled, and nothing of the stream is left on either side.
func TestCancelMidStream(t *testing.T) {
	handlerDone := make(chan error, 1)
	c, _ := start(t, &server{watch: func(_ *sandboxdv1.WatchRequest, st grpc.ServerStreamingServer[sandboxdv1.Event]) error {
		for {
			if err := st.Send(&sandboxdv1.Event{SessionId: "e"}); err != nil {
				handlerDone <- st.Context().Err()
				return err
			}
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.NewStream(ctx, methodWatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendLast(&sandboxdv1.WatchRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := s.Recv(&sandboxdv1.Event{}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	var rerr error
	for rerr == nil {
		rerr = s.Recv(&sandboxdv1.Event{})
	}
	if status.Code(rerr) != codes.Canceled {
		t.Errorf("Recv after cancel = %v, want Canceled", rerr)
	}
	select {
	case err := <-handlerDone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the server's handler ended with its context at %v, want cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was not told of the cancel")
	}
	if n := openStreams(c); n != 0 {
		t.Errorf("%d streams still open", n)
	}
	// The connection goes on serving.
	c2 := &sandboxdv1.SessionInfo{}
	err = c.Invoke(context.Background(), methodInspect, &sandboxdv1.InspectRequest{}, c2)
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("a call after the cancel = %v, want the server's Unimplemented", err)
	}
}

// TestServerGoAway: a server stopping gracefully lets the call in flight
// finish, and the connection takes no new one.
func TestServerGoAway(t *testing.T) {
	release := make(chan struct{})
	inHandler := make(chan struct{})
	c, gs := start(t, &server{inspect: func(context.Context, *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
		close(inHandler)
		<-release
		return &sandboxdv1.SessionInfo{Id: "finished"}, nil
	}})
	done := make(chan error, 1)
	info := &sandboxdv1.SessionInfo{}
	go func() { done <- c.Invoke(context.Background(), methodInspect, &sandboxdv1.InspectRequest{}, info) }()
	<-inHandler
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	for c.Usable() {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.NewStream(context.Background(), methodInspect); status.Code(err) != codes.Unavailable {
		t.Errorf("a new call after GOAWAY = %v, want Unavailable", err)
	}
	close(release)
	if err := <-done; err != nil || info.GetId() != "finished" {
		t.Errorf("the call in flight = %v, %q; want it finished", err, info.GetId())
	}
	<-stopped
}

// TestErrorStatusWithDetails: a status's code, message (with characters
// grpc-message percent-encodes) and details arrive as the server sent them.
func TestErrorStatusWithDetails(t *testing.T) {
	msg := "no: 100% refusé\n\"quoted\""
	c, _ := start(t, &server{inspect: func(context.Context, *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
		st, err := status.New(codes.ResourceExhausted, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(1234 * time.Millisecond)})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}})
	err := c.Invoke(context.Background(), methodInspect, &sandboxdv1.InspectRequest{}, &sandboxdv1.SessionInfo{})
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted || st.Message() != msg {
		t.Fatalf("err = %v, want ResourceExhausted %q", err, msg)
	}
	det := st.Details()
	if len(det) != 1 {
		t.Fatalf("details = %v", det)
	}
	if ri, ok := det[0].(*errdetails.RetryInfo); !ok || ri.GetRetryDelay().AsDuration() != 1234*time.Millisecond {
		t.Errorf("detail = %v, want the RetryInfo", det[0])
	}
}

// TestMetadataGoesWithEveryCall: Options.Metadata reaches the server's
// handler of each call, unary and streaming.
func TestMetadataGoesWithEveryCall(t *testing.T) {
	want := [][2]string{{"sandboxd-test-a", "1"}, {"sandboxd-test-b", "two"}}
	got := make(chan metadata.MD, 2)
	c, _ := startWith(t, &server{
		inspect: func(ctx context.Context, _ *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			got <- md
			return &sandboxdv1.SessionInfo{}, nil
		},
		session: func(st sessionStream) error {
			md, _ := metadata.FromIncomingContext(st.Context())
			got <- md
			return nil
		},
	}, Options{Window: 1 << 20, MaxRecvMsgSize: 64 << 20, Authority: "test", Metadata: want})
	if err := c.Invoke(context.Background(), methodInspect, &sandboxdv1.InspectRequest{}, &sandboxdv1.SessionInfo{}); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream(context.Background(), methodSession)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Cancel()
	if err := s.SendLast(stdin(nil)); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"unary", "stream"} {
		md := <-got
		for _, kv := range want {
			if v := md.Get(kv[0]); len(v) != 1 || v[0] != kv[1] {
				t.Errorf("%s call: %s is %q, want %q", call, kv[0], v, kv[1])
			}
		}
	}
}

// TestDeadline: a call's deadline reaches the server as grpc-timeout, and
// the client ends the call with DeadlineExceeded when it passes.
func TestDeadline(t *testing.T) {
	serverDeadline := make(chan time.Time, 1)
	c, _ := start(t, &server{inspect: func(ctx context.Context, _ *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
		dl, _ := ctx.Deadline()
		serverDeadline <- dl
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	err := c.Invoke(ctx, methodInspect, &sandboxdv1.InspectRequest{}, &sandboxdv1.SessionInfo{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	dl := <-serverDeadline
	if dl.IsZero() || dl.After(want.Add(50*time.Millisecond)) {
		t.Errorf("the server's deadline is %v, want about %v", dl, want)
	}
	if n := openStreams(c); n != 0 {
		t.Errorf("%d streams still open", n)
	}
}

// TestBrokenConnection: a connection that drops ends the calls on it with
// Unavailable, and the connection is not used again.
func TestBrokenConnection(t *testing.T) {
	c, gs := start(t, &server{session: func(st sessionStream) error {
		<-st.Context().Done()
		return nil
	}})
	s, err := c.NewStream(context.Background(), methodSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(stdin(nil)); err != nil {
		t.Fatal(err)
	}
	gs.Stop()
	err = s.Recv(&sandboxdv1.SessionResponse{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Recv = %v, want Unavailable", err)
	}
	if c.Usable() {
		t.Error("a broken connection says it is usable")
	}
}

func TestEncodeTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:           "0n",
		1500 * time.Nanosecond: "1500n",
		99999999:               "99999999n",
		100000001:              "100001u",
		5 * time.Second:        "5000000u",
		2 * time.Hour:          "7200000m",
		1000 * time.Hour:       "3600000S",
	} {
		if got := encodeTimeout(d); got != want {
			t.Errorf("encodeTimeout(%v) = %s, want %s", d, got, want)
		}
	}
}
