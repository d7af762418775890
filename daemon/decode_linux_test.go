package daemon

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// frameStream is a grpc.ServerStream whose one message is frame.
type frameStream struct {
	grpc.ServerStream
	frame []byte
}

func (s frameStream) RecvMsg(m any) error {
	*m.(*rawFrame) = s.frame
	return nil
}

// A *rawFrame passes decodingStream undecoded, for firstMessage to decode
// on the handler's goroutine; any other message is decoded as before.
func TestDecodingStreamPassesRawFramesThrough(t *testing.T) {
	garbage := []byte{0xff, 0xff, 0xff}
	s := decodingStream{frameStream{frame: garbage}}
	var f rawFrame
	if err := s.RecvMsg(&f); err != nil {
		t.Fatalf("RecvMsg(*rawFrame): %v", err)
	}
	if !bytes.Equal(f, garbage) {
		t.Fatalf("RecvMsg(*rawFrame) = %x, want the bytes as they came, %x", []byte(f), garbage)
	}
	var req sandboxdv1.SessionRequest
	wantCode(t, s.RecvMsg(&req), codes.InvalidArgument, "cannot be decoded")
}

// A Start that cannot be decoded is refused as the client's error, naming
// the field, whichever goroutine decodes it.
func TestFirstMessageNotUTF8NamesItsField(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.FirstMessageTimeout = 5 * time.Second })
	conn := rawClient(t, h.socket)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := conn.NewStream(ctx, &sandboxdv1grpc.Sandboxd_ServiceDesc.Streams[0], "/sandboxd.v1.Sandboxd/Session")
	if err != nil {
		t.Fatal(err)
	}
	start := &sandboxdv1.Start{Command: &sandboxdv1.Command{Argv: []string{"/bin/true"}}}
	msg := encodeRequest(t, &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: start}})
	msg = bytes.Replace(msg, []byte("/bin/"), []byte("/\xffin/"), 1)
	if err := s.SendMsg(msg); err != nil {
		t.Fatal(err)
	}
	var resp sandboxdv1.SessionResponse
	wantCode(t, s.RecvMsg(&resp), codes.InvalidArgument, "command.argv[0]")
	if n := len(h.svc.List(context.Background(), Caller{})); n != 0 {
		t.Fatalf("the refused Start left %d sessions", n)
	}
}

// The first message is received raw only from the Service's own server's
// streams, as the generated handler wraps them: any other stream's codec
// would refuse a *rawFrame.
func TestRawReceiverOnlyForTheServicesStreams(t *testing.T) {
	own := &grpc.GenericServerStream[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]{ServerStream: decodingStream{frameStream{}}}
	if _, ok := rawReceiver(own); !ok {
		t.Error("a stream of the Service's own server is not received raw")
	}
	other := &grpc.GenericServerStream[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]{ServerStream: frameStream{}}
	if _, ok := rawReceiver(other); ok {
		t.Error("another server's stream is received raw")
	}
}
