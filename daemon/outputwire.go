package daemon

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// maxOutputMessage bounds an encoded SessionResponse carrying an Output.
// gRPC takes the buffer a message is received into (and, through its proto
// codec, marshalled into) from pools of power-of-two sizes, and zeroes it:
// an Output of a full 32 KiB read plus its few bytes of framing took a
// 1 MiB buffer on each side, a clear of 1 MiB per 32 KiB sent, which the
// profile of the PTY figure showed as a fifth of the daemon's CPU and a
// quarter of the client's.
const maxOutputMessage = 32 << 10

// outputFraming is more than the bytes a SessionResponse adds around an
// Output's data: the oneof's tag and length, the stream, the data's tag
// and length.
const outputFraming = 16

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
