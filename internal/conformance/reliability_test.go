//go:build linux || darwin

package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// rawRequest is a request already encoded, sent as it is: the Go protobuf
// runtime refuses to encode a string that is not UTF-8, which is exactly
// what some of the bad inputs below are.
type rawRequest []byte

// rawCodec sends a rawRequest as it is and everything else as protobuf.
type rawCodec struct{ encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawRequest); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// rawConn is a gRPC connection to the suite's daemon that can send
// rawRequests.
func rawConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///sandboxd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", suite.daemon.socket)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2("proto")})),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// badUTF8 marks where encode puts bytes that are not UTF-8.
const badUTF8 = "@NOTUTF8@"

// encode marshals m and replaces every badUTF8 in it with as many bytes
// that are not UTF-8; lengths stay as they were encoded.
func encode(t *testing.T, m proto.Message) rawRequest {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte(badUTF8), append([]byte{0xff, 0xfe}, badUTF8[2:]...))
}

func startReq(st *sandboxdv1.Start) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: st}}
}

func attachReq(id string) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Attach{Attach: &sandboxdv1.Attach{Id: id, ReadOnly: true}}}
}

func signalReq(sig int32) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Signal{Signal: &sandboxdv1.Signal{Signal: sig}}}
}

// sessionExchange sends msgs on a new Session stream (closing its sending
// side after them when closeSend), reads until the stream ends, and
// returns how it ended.
func sessionExchange(t *testing.T, conn *grpc.ClientConn, closeSend bool, msgs ...rawRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	stream, err := conn.NewStream(ctx, &sandboxdv1.Sandboxd_ServiceDesc.Streams[0], "/sandboxd.v1.Sandboxd/Session")
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := stream.SendMsg(m); err != nil {
			break
		}
	}
	if closeSend {
		_ = stream.CloseSend()
	}
	for {
		var resp sandboxdv1.SessionResponse
		if err := stream.RecvMsg(&resp); err != nil {
			return err
		}
		if resp.GetExit() != nil {
			return fmt.Errorf("session ended with exit %v instead of an error", resp.GetExit())
		}
	}
}

// TestBadInputCodes sends every kind of bad input issue 22 lists straight
// to the daemon: each must be answered with InvalidArgument (NotFound for
// an unknown id) naming its field, in a message that does not echo an
// oversized input, nothing may run, and the daemon keeps serving.
func TestBadInputCodes(t *testing.T) {
	requireDaemon(t)
	conn := rawConn(t)
	rpc := sandboxdv1.NewSandboxdClient(conn)
	hugeID := strings.Repeat("a", 1<<20)
	type exchange struct {
		closeSend bool
		msgs      []rawRequest
	}
	for _, c := range []struct {
		name  string
		code  codes.Code
		field string
		// stream builds the messages of a Session stream; unary makes
		// one unary call instead.
		stream func(t *testing.T, f *fixture, ran string) exchange
		unary  func(ctx context.Context) error
	}{
		{name: "argv not UTF-8", code: codes.InvalidArgument, field: "command.argv[3]", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran, badUTF8)))}}
		}},
		{name: "env value not UTF-8", code: codes.InvalidArgument, field: `command.env["X"]`, stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), map[string]string{"X": badUTF8}, "write", ran)))}}
		}},
		{name: "env name not UTF-8", code: codes.InvalidArgument, field: "command.env", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), map[string]string{badUTF8: "x"}, "write", ran)))}}
		}},
		{name: "write root not UTF-8", code: codes.InvalidArgument, field: "policy.filesystem.write[1]", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir, "/var/tmp/"+badUTF8), nil, nil), nil, "write", ran)))}}
		}},
		{name: "cwd not UTF-8", code: codes.InvalidArgument, field: "command.cwd", stream: func(t *testing.T, f *fixture, ran string) exchange {
			st := probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran)
			st.Command.Cwd = "/" + badUTF8
			return exchange{msgs: []rawRequest{encode(t, startReq(st))}}
		}},
		{name: "stream closed before its first message", code: codes.InvalidArgument, field: "start", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{closeSend: true}
		}},
		{name: "memory limit out of range", code: codes.InvalidArgument, field: "policy.limits.memory_bytes", stream: func(t *testing.T, f *fixture, ran string) exchange {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{MemoryBytes: 1 << 62}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, p, nil, "write", ran)))}}
		}},
		{name: "pids limit out of range", code: codes.InvalidArgument, field: "policy.limits.pids", stream: func(t *testing.T, f *fixture, ran string) exchange {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{Pids: 1 << 30}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, p, nil, "write", ran)))}}
		}},
		{name: "second Start on a stream", code: codes.InvalidArgument, field: "start", stream: func(t *testing.T, f *fixture, ran string) exchange {
			st := probeStart(false, nil, nil, "hold", "second-start")
			return exchange{msgs: []rawRequest{encode(t, startReq(st)), encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran)))}}
		}},
		{name: "Attach after a Start on a stream", code: codes.InvalidArgument, field: "start", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "second-attach"))), encode(t, attachReq("0123456789abcdef"))}}
		}},
		{name: "in-stream signal 9999", code: codes.InvalidArgument, field: "signal", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "signal-9999"))), encode(t, signalReq(9999))}}
		}},
		{name: "in-stream signal -1", code: codes.InvalidArgument, field: "signal", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "signal-minus-1"))), encode(t, signalReq(-1))}}
		}},
		{name: "in-stream stdin not decodable", code: codes.InvalidArgument, field: "SessionRequest", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "garbage"))), rawRequest{0xff, 0xff, 0xff}}}
		}},
		{name: "environment of 1 MiB", code: codes.InvalidArgument, field: "command.env", stream: func(t *testing.T, f *fixture, ran string) exchange {
			env := map[string]string{}
			for i := range 16 {
				env[fmt.Sprintf("BIG%d", i)] = strings.Repeat("x", 64<<10)
			}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), env, "write", ran)))}}
		}},
		{name: "one variable past execve's limit", code: codes.InvalidArgument, field: `command.env["BIG"]`, stream: func(t *testing.T, f *fixture, ran string) exchange {
			env := map[string]string{"BIG": strings.Repeat("x", 200<<10)}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), env, "write", ran)))}}
		}},
		{name: "one argument past execve's limit", code: codes.InvalidArgument, field: "command.argv[3]", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran, strings.Repeat("x", 200<<10))))}}
		}},
		{name: "20000 write roots", code: codes.InvalidArgument, field: "policy.filesystem", stream: func(t *testing.T, f *fixture, ran string) exchange {
			roots := []string{f.dir}
			for i := range 20000 {
				roots = append(roots, fmt.Sprintf("%s/w%d", f.dir, i))
			}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(roots, nil, nil), nil, "write", ran)))}}
		}},
		{name: "attach to an id of 1 MiB", code: codes.InvalidArgument, field: "attach.id", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, attachReq(hugeID))}}
		}},
		{name: "inspect an id of 1 MiB", code: codes.NotFound, field: "session", unary: func(ctx context.Context) error {
			_, err := rpc.Inspect(ctx, &sandboxdv1.InspectRequest{Id: hugeID})
			return err
		}},
		{name: "kill an id of 1 MiB", code: codes.NotFound, field: "session", unary: func(ctx context.Context) error {
			_, err := rpc.Kill(ctx, &sandboxdv1.KillRequest{Id: hugeID})
			return err
		}},
		{name: "inspect an id not UTF-8", code: codes.InvalidArgument, field: "id", unary: func(ctx context.Context) error {
			return conn.Invoke(ctx, "/sandboxd.v1.Sandboxd/Inspect", encode(t, &sandboxdv1.InspectRequest{Id: badUTF8}), &sandboxdv1.SessionInfo{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireDaemon(t)
			f := newFixture(t)
			ran := f.path("ran")
			var err error
			if c.unary != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err = c.unary(ctx)
				cancel()
			} else {
				ex := c.stream(t, f, ran)
				err = sessionExchange(t, conn, ex.closeSend, ex.msgs...)
			}
			st := status.Convert(err)
			if st.Code() != c.code || !strings.Contains(st.Message(), c.field) {
				t.Errorf("got %v %.300q, want %v naming %s", st.Code(), st.Message(), c.code, c.field)
			}
			if len(st.Message()) > 512 {
				t.Errorf("message of %d bytes echoes the input", len(st.Message()))
			}
			absent(t, ran)
			stillServing(t)
		})
	}
}
