package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
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
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// FuzzSessionProtocol plays a sequence of Session stream messages decoded
// from the input (Starts, Attaches, in-stream signals, input, resizes,
// undecodable bytes, half-closes, Kill calls) against a daemon serving on a
// real socket with the fake backend. Whatever the sequence, every stream
// must end with a status the protocol names (never Internal or Unknown)
// and carry at most one Started and one Exit, and the daemon must keep
// answering and shut down cleanly. The fake backend runs only fixed,
// harmless commands: the fuzzer picks among them, never the program.
func FuzzSessionProtocol(f *testing.F) {
	for _, seed := range [][]byte{
		{opStart, 0, 0},
		{opStart, 1, 0, opStdin, 3, 'a', 'b', 'c', opClose},
		{opStart, 2, 1, opSignal, 0x0f, 0x27, 0, 0},
		{opStart, 3, 0, opStart, 0, 0},
		{opStart, 0, 2, opAttach, 0, opAttach, 1},
		{opStart, 1, 4, opResize, 0xff, 0xff, 0xff, 0xff, opKill, 9},
		{opRaw, 3, 0xff, 0xff, 0xff},
		{opStart, 1, 0, opRaw, 2, 0x0a, 0x80},
		{opClose},
		{opAttach, 0, opClose},
		{opStart, 4, 0, opStdin, 0, opSignal, 0xff, 0xff, 0xff, 0xff},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			return
		}
		h := startDaemon(t, func(c *Config) { c.FirstMessageTimeout = time.Second })
		conn := rawClient(t, h.socket)
		// Not h.client: its target is a URI, and the fuzzer's test names
		// (with '#') make the socket path a bad one.
		p := &player{t: t, conn: conn, rpc: sandboxdv1grpc.NewSandboxdClient(conn), data: data}
		p.play()
		p.finish()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.rpc.List(ctx, &sandboxdv1.ListRequest{}); err != nil {
			t.Fatalf("daemon stopped answering after %x: %v", data, err)
		}
	})
}

// Operations of FuzzSessionProtocol's input, one byte each, then their
// arguments.
const (
	opStart  = iota // command choice, flags (tty, detach, env, bad UTF-8, limits)
	opAttach        // which id (0: the latest session's, else a made-up one), read-only
	opSignal        // 4 bytes, little endian, the in-stream signal
	opStdin         // length, data
	opResize        // rows (2 bytes), cols (2 bytes)
	opRaw           // length, bytes sent as a message as they are
	opClose         // half-close the stream
	opKill          // signal byte: Kill the latest session (0: the whole sandbox)
	opCount
)

// fuzzCommands are all the fuzzer may run: harmless without a sandbox.
var fuzzCommands = [][]string{
	{"/bin/true"},
	{"/bin/cat"},
	{"/bin/sh", "-c", "exit 3"},
	{"/bin/echo", "fuzz"},
	{"/bin/sleep", "0.2"},
	{"/nonexistent/command"},
}

// player plays one input.
type player struct {
	t      *testing.T
	conn   *grpc.ClientConn
	rpc    sandboxdv1grpc.SandboxdClient
	data   []byte
	stream grpc.ClientStream
	cancel context.CancelFunc
	// closed are the cancels of streams half-closed already.
	closed []context.CancelFunc
	ids    []string
	mu     sync.Mutex
	drains sync.WaitGroup
}

func (p *player) byte() byte {
	if len(p.data) == 0 {
		return 0
	}
	b := p.data[0]
	p.data = p.data[1:]
	return b
}

func (p *player) bytes(n int) []byte {
	n = min(n, len(p.data))
	b := p.data[:n]
	p.data = p.data[n:]
	return b
}

func (p *player) play() {
	for len(p.data) > 0 {
		switch p.byte() % opCount {
		case opStart:
			p.send(p.start())
		case opAttach:
			id := "0123456789abcdef"
			if p.byte()%2 == 0 {
				p.mu.Lock()
				if len(p.ids) > 0 {
					id = p.ids[len(p.ids)-1]
				}
				p.mu.Unlock()
			}
			p.send(encodeRequest(p.t, &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Attach{Attach: &sandboxdv1.Attach{Id: id, ReadOnly: p.byte()%2 == 0}}}))
		case opSignal:
			sig := int32(binary.LittleEndian.Uint32(append(p.bytes(4), 0, 0, 0, 0)))
			p.send(encodeRequest(p.t, &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Signal{Signal: &sandboxdv1.Signal{Signal: sig}}}))
		case opStdin:
			d := p.bytes(int(p.byte()))
			p.send(encodeRequest(p.t, &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Data: d, Eof: len(d) == 0}}}))
		case opResize:
			b := append(p.bytes(4), 0, 0, 0, 0)
			// Shifted, some sizes are beyond what a terminal can be.
			win := &sandboxdv1.WindowSize{Rows: uint32(binary.LittleEndian.Uint16(b)) << (b[0] % 2 * 8), Cols: uint32(binary.LittleEndian.Uint16(b[2:]))}
			p.send(encodeRequest(p.t, &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Resize{Resize: win}}))
		case opRaw:
			p.send(rawMessage(bytes.Clone(p.bytes(int(p.byte())))))
		case opClose:
			if p.stream != nil {
				_ = p.stream.CloseSend()
				// What follows goes on a stream of its own: this one
				// can send no more.
				p.closed = append(p.closed, p.cancel)
				p.stream = nil
			}
		case opKill:
			sig := int32(p.byte() % 40)
			p.mu.Lock()
			var id string
			if len(p.ids) > 0 {
				id = p.ids[len(p.ids)-1]
			}
			p.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.rpc.Kill(ctx, &sandboxdv1.KillRequest{Id: id, Signal: sig})
			cancel()
			p.check("Kill", err)
		}
	}
}

// start is a Start built from the input.
func (p *player) start() rawMessage {
	c := p.byte()
	flags := p.byte()
	st := &sandboxdv1.Start{
		Command: &sandboxdv1.Command{Argv: fuzzCommands[int(c)%len(fuzzCommands)]},
		Tty:     flags&1 != 0,
		Detach:  flags&2 != 0,
	}
	if flags&4 != 0 {
		st.Command.Env = map[string]string{strings.ToValidUTF8(string(p.bytes(4)), "?"): strings.ToValidUTF8(string(p.bytes(8)), "?")}
	}
	if flags&8 != 0 {
		st.Policy = &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/tmp/" + strings.ToValidUTF8(string(p.bytes(6)), "?")}}}
	}
	if flags&16 != 0 {
		b := append(p.bytes(8), 0, 0, 0, 0, 0, 0, 0, 0)
		st.Policy = &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{MemoryBytes: binary.LittleEndian.Uint64(b), Pids: uint32(b[0])}}
	}
	if st.Tty {
		st.Window = &sandboxdv1.WindowSize{Rows: 24, Cols: 80}
	}
	msg := encodeRequest(p.t, &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: st}})
	if flags&32 != 0 {
		// A string that is not UTF-8 where the command is.
		msg = bytes.Replace(msg, []byte("/bin/"), []byte("/\xffin/"), 1)
	}
	return msg
}

// send sends m on the current stream, opening one first.
func (p *player) send(m rawMessage) {
	if p.stream == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s, err := p.conn.NewStream(ctx, &sandboxdv1grpc.Sandboxd_ServiceDesc.Streams[0], "/sandboxd.v1.Sandboxd/Session")
		if err != nil {
			cancel()
			p.t.Fatalf("open stream: %v", err)
		}
		p.stream, p.cancel = s, cancel
		p.drains.Add(1)
		go p.drain(s)
	}
	// An error means the stream has ended; drain reports how.
	_ = p.stream.SendMsg(m)
}

// drain reads a stream to its end and checks what it got.
func (p *player) drain(s grpc.ClientStream) {
	defer p.drains.Done()
	exits := 0
	started := false
	for {
		var resp sandboxdv1.SessionResponse
		err := s.RecvMsg(&resp)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			p.check("Session", err)
			return
		}
		switch m := resp.Msg.(type) {
		case *sandboxdv1.SessionResponse_Started:
			if started {
				p.t.Errorf("a second Started on one stream")
			}
			started = true
			p.mu.Lock()
			p.ids = append(p.ids, m.Started.GetSessionId())
			p.mu.Unlock()
		case *sandboxdv1.SessionResponse_Exit:
			if exits++; exits > 1 {
				p.t.Errorf("a second Exit on one stream")
			}
		}
	}
}

// check fails on a status the protocol does not name for a client's
// doing: the daemon failing (Internal) or not knowing what failed (Unknown).
func (p *player) check(call string, err error) {
	switch status.Code(err) {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		p.t.Errorf("%s: %v", call, err)
	}
}

// finish half-closes the stream and waits for it to end: a session that
// waits for input gets EOF, one still running is killed with its client.
func (p *player) finish() {
	if p.stream != nil {
		_ = p.stream.CloseSend()
		p.closed = append(p.closed, p.cancel)
	}
	done := make(chan struct{})
	go func() { p.drains.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	for _, cancel := range p.closed {
		cancel()
	}
	p.drains.Wait()
}

// rawMessage is a request already encoded, sent as it is.
type rawMessage []byte

type rawClientCodec struct{ encoding.CodecV2 }

func (c rawClientCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// rawClient is a connection to socket that sends rawMessages as they are.
func rawClient(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///sandboxd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawClientCodec{encoding.GetCodecV2("proto")})),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func encodeRequest(t *testing.T, m proto.Message) rawMessage {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
