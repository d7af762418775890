package daemon

import (
	"context"
	"strconv"

	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// maxOutputMessage bounds an encoded SessionResponse carrying an Output,
// for a client that did not say it takes larger ones. gRPC takes the buffer
// a message is received into (and, through its proto codec, marshalled
// into) from pools of power-of-two sizes, and zeroes it: an Output of a full
// 32 KiB read plus its few bytes of framing took a 1 MiB buffer on each
// side, a clear of 1 MiB per 32 KiB sent, which the profile of the PTY
// figure showed as a fifth of the daemon's CPU and a quarter of the
// client's. The daemon's side no longer marshals (marshalOutput); a
// grpc-go client still receives so.
const maxOutputMessage = 32 << 10

// largeOutputMessage bounds an encoded SessionResponse carrying an Output
// for a client that takes messages of that size (outputMessageMetadata):
// the Go client receives each message into a buffer of its length. Each
// message costs the daemon, gRPC's writer and the client a wake-up of their
// own, so while output floods fewer, larger ones move it faster (the PTY
// figure, in four alternated runs: 0.67 to 0.71x a raw pty with 32 KiB
// messages, 0.70 to 0.78x with these).
const largeOutputMessage = 128 << 10

// outputMessageMetadata is the request metadata by which a client says
// how large an Output message (the whole encoded SessionResponse) it takes:
// one of at least largeOutputMessage bytes gets messages of up to that
// size, any other client messages of up to maxOutputMessage. api/client
// sends it (its own constant of the same name).
const outputMessageMetadata = "sandboxd-output-message-max"

// outputDataLimit is the most output one Output message to the client of
// ctx carries.
func outputDataLimit(ctx context.Context) int {
	for _, v := range metadata.ValueFromIncomingContext(ctx, outputMessageMetadata) {
		if n, err := strconv.Atoi(v); err == nil && n >= largeOutputMessage {
			return readChunk
		}
	}
	return outputChunk
}

// outputFraming is more than the bytes a SessionResponse adds around an
// Output's data: the oneof's tag and length, the stream, the data's tag
// and length.
const outputFraming = 16

// sendOutput sends o to a client in messages of at most limit bytes of
// output each, which share o's data.
func sendOutput(stream SessionStream, o *sandboxdv1.Output, limit int) error {
	data := o.GetData()
	for len(data) > limit {
		part := &sandboxdv1.Output{Stream: o.GetStream(), Data: data[:limit:limit]}
		if err := stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: part}}); err != nil {
			return err
		}
		data = data[limit:]
	}
	if len(data) < len(o.GetData()) {
		o = &sandboxdv1.Output{Stream: o.GetStream(), Data: data}
	}
	return stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: o}})
}

// marshalOutput encodes r as proto.Marshal does when it carries only an
// Output, without copying the output: the data goes to gRPC as it is,
// after a few bytes of framing. The data is never changed once read (the
// scrollback and every viewer share it), so gRPC's writer may read it after
// Send has returned. ok is false for any other message, which the proto
// codec encodes.
func marshalOutput(r *sandboxdv1.SessionResponse) (_ mem.BufferSlice, ok bool) {
	m, isOutput := r.GetMsg().(*sandboxdv1.SessionResponse_Output)
	if !isOutput || m.Output == nil {
		return nil, false
	}
	o := m.Output
	// What the daemon itself makes has no unknown fields; a message that
	// does is left to the codec, which keeps them.
	if len(r.ProtoReflect().GetUnknown()) > 0 || len(o.ProtoReflect().GetUnknown()) > 0 {
		return nil, false
	}
	data := o.GetData()
	inner := 0
	if o.GetStream() != 0 {
		inner += protowire.SizeTag(1) + protowire.SizeVarint(uint64(o.GetStream()))
	}
	if len(data) > 0 {
		inner += protowire.SizeTag(2) + protowire.SizeBytes(len(data))
	}
	head := make([]byte, 0, outputFraming)
	head = protowire.AppendTag(head, 2, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(inner))
	if o.GetStream() != 0 {
		head = protowire.AppendTag(head, 1, protowire.VarintType)
		head = protowire.AppendVarint(head, uint64(o.GetStream()))
	}
	if len(data) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(head)}, true
	}
	head = protowire.AppendTag(head, 2, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(data)))
	return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(data)}, true
}
