package daemon

import (
	"bytes"
	"testing"

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

// A full read and its framing stay within one of gRPC's pool sizes.
func TestFullOutputFitsItsBuffer(t *testing.T) {
	r := outputResponse(sandboxdv1.Output_STDERR, make([]byte, readChunk))
	if n := proto.Size(r); n > maxOutputMessage {
		t.Errorf("an Output of readChunk bytes encodes to %d bytes, more than %d", n, maxOutputMessage)
	}
}
