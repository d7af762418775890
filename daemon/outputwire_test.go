package daemon

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func outputResponse(stream sandboxdv1.Output_Stream, data []byte) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: &sandboxdv1.Output{Stream: stream, Data: data}}}
}

// The Output fast path must put on the wire exactly what the proto codec
// would: the client decodes it with the generated code.
func TestMarshalOutputIsProtoMarshal(t *testing.T) {
	var msgs []*sandboxdv1.SessionResponse
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, readChunk} {
		data := bytes.Repeat([]byte{'x'}, n)
		for _, s := range []sandboxdv1.Output_Stream{sandboxdv1.Output_STREAM_UNSPECIFIED, sandboxdv1.Output_STDOUT, sandboxdv1.Output_STDERR} {
			msgs = append(msgs, outputResponse(s, data))
		}
	}
	msgs = append(msgs, &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: &sandboxdv1.Output{}}})
	for _, r := range msgs {
		got, ok := marshalOutput(r)
		if !ok {
			t.Fatalf("stream %v, %d bytes: not taken by the fast path", r.GetOutput().GetStream(), len(r.GetOutput().GetData()))
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); !bytes.Equal(b, want) {
			t.Errorf("stream %v, %d bytes: encoded %d bytes %x..., proto.Marshal %d bytes %x...", r.GetOutput().GetStream(), len(r.GetOutput().GetData()), len(b), b[:min(len(b), 12)], len(want), want[:min(len(want), 12)])
		}
	}
}

// The data is handed on, not copied: that is the point of the fast path.
func TestMarshalOutputSharesTheData(t *testing.T) {
	data := []byte("hello")
	got, ok := marshalOutput(outputResponse(sandboxdv1.Output_STDOUT, data))
	if !ok || len(got) != 2 {
		t.Fatalf("got %d buffers (ok %v), want the framing and the data", len(got), ok)
	}
	if d := got[1].ReadOnlyData(); &d[0] != &data[0] {
		t.Error("the data was copied")
	}
}

func TestMarshalOutputLeavesOtherMessagesToTheCodec(t *testing.T) {
	unknown := outputResponse(sandboxdv1.Output_STDOUT, []byte("x"))
	unknown.GetOutput().ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
	for name, r := range map[string]*sandboxdv1.SessionResponse{
		"exit":          {Msg: &sandboxdv1.SessionResponse_Exit{Exit: &sandboxdv1.Exit{ExitCode: 3}}},
		"started":       {Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: "s"}}},
		"empty":         {},
		"nil output":    {Msg: &sandboxdv1.SessionResponse_Output{}},
		"unknown field": unknown,
	} {
		if _, ok := marshalOutput(r); ok {
			t.Errorf("%s: taken by the Output fast path", name)
		}
	}
}

// A full read and its framing stay within the large message; a message
// to any other client, within one of gRPC's pool sizes.
func TestFullOutputFitsItsBuffer(t *testing.T) {
	for _, c := range []struct {
		data, max int
	}{{readChunk, largeOutputMessage}, {outputChunk, maxOutputMessage}} {
		r := outputResponse(sandboxdv1.Output_STDERR, make([]byte, c.data))
		if n := proto.Size(r); n > c.max {
			t.Errorf("an Output of %d bytes encodes to %d bytes, more than %d", c.data, n, c.max)
		}
	}
}

func TestOutputDataLimitFollowsTheClientsMetadata(t *testing.T) {
	for _, c := range []struct {
		md   []string
		want int
	}{
		{nil, outputChunk},
		{[]string{outputMessageMetadata, fmt.Sprint(largeOutputMessage)}, readChunk},
		{[]string{outputMessageMetadata, fmt.Sprint(16 * largeOutputMessage)}, readChunk},
		{[]string{outputMessageMetadata, fmt.Sprint(largeOutputMessage - 1)}, outputChunk},
		{[]string{outputMessageMetadata, "lots"}, outputChunk},
		{[]string{"other", fmt.Sprint(largeOutputMessage)}, outputChunk},
	} {
		ctx := context.Background()
		if c.md != nil {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(c.md...))
		}
		if got := outputDataLimit(ctx); got != c.want {
			t.Errorf("metadata %q: limit %d, want %d", c.md, got, c.want)
		}
	}
}

// sentStream records what is sent on it.
type sentStream struct {
	SessionStream
	sent []*sandboxdv1.SessionResponse
}

func (s *sentStream) Send(r *sandboxdv1.SessionResponse) error {
	s.sent = append(s.sent, r)
	return nil
}

// A full read goes to a client of small messages in parts, each within
// its message, in order, sharing the read's data; to a client of large
// messages as it is.
func TestSendOutputSplitsAReadForAClientOfSmallMessages(t *testing.T) {
	data := make([]byte, readChunk)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	o := &sandboxdv1.Output{Stream: sandboxdv1.Output_STDERR, Data: data}
	for _, limit := range []int{outputChunk, readChunk} {
		var st sentStream
		if err := sendOutput(&st, o, limit); err != nil {
			t.Fatal(err)
		}
		if want := (len(data) + limit - 1) / limit; len(st.sent) != want {
			t.Fatalf("limit %d: %d messages, want %d", limit, len(st.sent), want)
		}
		var got []byte
		for _, r := range st.sent {
			part := r.GetOutput()
			if part.GetStream() != o.GetStream() {
				t.Errorf("limit %d: a part of stream %v, want %v", limit, part.GetStream(), o.GetStream())
			}
			if n := proto.Size(r); len(part.GetData()) > limit || n > largeOutputMessage || limit == outputChunk && n > maxOutputMessage {
				t.Errorf("limit %d: a part of %d bytes, %d encoded", limit, len(part.GetData()), n)
			}
			if &part.GetData()[0] != &data[len(got)] {
				t.Errorf("limit %d: the part at %d was copied", limit, len(got))
			}
			got = append(got, part.GetData()...)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("limit %d: the parts make %d bytes that differ from the read's %d", limit, len(got), len(data))
		}
	}
}
