package client

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func encodedResponses(t testing.TB) [][]byte {
	var out [][]byte
	for _, r := range []*sandboxdv1.SessionResponse{
		output(sandboxdv1.Output_STDOUT, "hello"),
		output(sandboxdv1.Output_STDERR, string(bytes.Repeat([]byte{0xfe}, 128<<10-16))),
		output(sandboxdv1.Output_STREAM_UNSPECIFIED, "x"),
		output(sandboxdv1.Output_STDOUT, ""),
		{Msg: &sandboxdv1.SessionResponse_Output{Output: &sandboxdv1.Output{}}},
		started("s1"),
		exit(&sandboxdv1.Exit{ExitCode: 3}),
		{},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	// Fields twice, out of order, unknown, of the wrong wire type.
	tag := protowire.AppendTag
	inner := tag(nil, 2, protowire.BytesType)
	inner = protowire.AppendBytes(inner, []byte("ab"))
	inner = tag(inner, 1, protowire.VarintType)
	inner = protowire.AppendVarint(inner, 2)
	for _, extra := range [][]byte{
		nil,
		protowire.AppendBytes(tag(nil, 2, protowire.BytesType), []byte("cd")),
		protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1),
		protowire.AppendVarint(tag(nil, 9, protowire.VarintType), 1),
		protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 1),
		protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1<<40),
	} {
		in := append(append([]byte(nil), inner...), extra...)
		out = append(out, protowire.AppendBytes(tag(nil, 2, protowire.BytesType), in))
	}
	return out
}

// The Output fast path decodes what it takes exactly as the generated
// decoder does, and shares the encoding's bytes.
func FuzzDecodeResponseIsUnmarshalVT(f *testing.F) {
	for _, b := range encodedResponses(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &sandboxdv1.SessionResponse{}
		wantErr := want.UnmarshalVT(b)
		got := &sandboxdv1.SessionResponse{}
		err := decodeResponse(bytes.Clone(b), got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%x: error %v, the generated decoder's %v", b, err, wantErr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("%x: decoded %v, the generated decoder %v", b, got, want)
		}
	})
}

func TestDecodeResponseSharesTheOutput(t *testing.T) {
	b, err := proto.Marshal(output(sandboxdv1.Output_STDERR, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	var resp sandboxdv1.SessionResponse
	if err := decodeResponse(b, &resp); err != nil {
		t.Fatal(err)
	}
	d := resp.GetOutput().GetData()
	if string(d) != "hello" || resp.GetOutput().GetStream() != sandboxdv1.Output_STDERR {
		t.Fatalf("decoded %v", &resp)
	}
	if &d[0] != &b[len(b)-len(d)] {
		t.Error("the data was copied")
	}
}
