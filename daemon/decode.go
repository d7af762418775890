package daemon

import (
	"context"
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// grpc turns every decoding failure into an Internal status before a
// handler sees it, which says neither that the request was at fault nor
// where. So the handlers of the Sandboxd service receive the raw bytes
// (rawFrame) and decode them themselves (decodeInto), naming the field
// whose string is not UTF-8 as InvalidArgument.

// rawFrame is a request as it arrived on the wire.
type rawFrame []byte

// rawCodec passes a rawFrame through undecoded and decodes everything
// else as grpc's proto codec does.
type rawCodec struct{ encoding.CodecV2 }

// Marshal sends an Output's data without a copy (marshalOutput).
func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*sandboxdv1.SessionResponse); ok {
		if out, ok := marshalOutput(r); ok {
			return out, nil
		}
	}
	return c.CodecV2.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*rawFrame); ok {
		*f = data.Materialize()
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

func newRawCodec() rawCodec {
	return rawCodec{encoding.GetCodecV2("proto")}
}

// decodeInto decodes f into m; a string that is not UTF-8 is a
// RequestError naming its field.
func decodeInto(f rawFrame, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("decode request: %T is not a protobuf message", m)
	}
	err := proto.Unmarshal(f, msg)
	if err == nil {
		return nil
	}
	if field := invalidUTF8(msg.ProtoReflect().Descriptor(), f, ""); field != "" {
		return &RequestError{Field: field, Msg: "not valid UTF-8"}
	}
	return &RequestError{Field: string(msg.ProtoReflect().Descriptor().Name()), Msg: fmt.Sprintf("cannot be decoded: %v", err)}
}

// invalidUTF8 returns the path (as the daemon's errors spell fields:
// "command.argv[1]", `command.env["K"]`) of the first string field in the
// encoded message b that is not UTF-8, or "" if there is none. The path
// starts below a SessionRequest's start, as the other Start errors do.
func invalidUTF8(md protoreflect.MessageDescriptor, b []byte, prefix string) string {
	counts := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		val := b[:n]
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue
		}
		data, _ := protowire.ConsumeBytes(val)
		name := prefix + string(fd.Name())
		if md.FullName() == "sandboxd.v1.SessionRequest" && fd.Name() == "start" {
			name = ""
		}
		if fd.IsList() {
			name += "[" + strconv.Itoa(counts[num]) + "]"
			counts[num]++
		}
		switch {
		case fd.IsMap():
			if p := invalidMapEntry(fd, data, name); p != "" {
				return p
			}
		case fd.Kind() == protoreflect.StringKind:
			if !utf8.Valid(data) {
				return name
			}
		case fd.Kind() == protoreflect.MessageKind:
			sub := name
			if sub != "" {
				sub += "."
			}
			if p := invalidUTF8(fd.Message(), data, sub); p != "" {
				return p
			}
		}
	}
	return ""
}

// invalidMapEntry checks one entry of map field fd: a key that is not
// UTF-8 is named by the map, a value by its key.
func invalidMapEntry(fd protoreflect.FieldDescriptor, entry []byte, name string) string {
	var key []byte
	var badValue bool
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return ""
		}
		entry = entry[n:]
		n = protowire.ConsumeFieldValue(num, typ, entry)
		if n < 0 {
			return ""
		}
		val := entry[:n]
		entry = entry[n:]
		if typ != protowire.BytesType {
			continue
		}
		data, _ := protowire.ConsumeBytes(val)
		switch {
		case num == 1 && fd.MapKey().Kind() == protoreflect.StringKind:
			if !utf8.Valid(data) {
				return name + " (a name)"
			}
			key = data
		case num == 2 && fd.MapValue().Kind() == protoreflect.StringKind:
			badValue = !utf8.Valid(data)
		}
	}
	if badValue {
		return name + "[" + strconv.Quote(string(key)) + "]"
	}
	return ""
}

// decodingService returns desc with every handler decoding its requests
// itself (see rawFrame), so that a bad request is answered by toStatus.
func decodingService(desc grpc.ServiceDesc) grpc.ServiceDesc {
	methods := make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(m any) error { return recvDecoded(dec, m) }, in)
		}
		methods[i] = m
	}
	streams := make([]grpc.StreamDesc, len(desc.Streams))
	for i, s := range desc.Streams {
		h := s.Handler
		s.Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, decodingStream{stream})
		}
		streams[i] = s
	}
	desc.Methods, desc.Streams = methods, streams
	return desc
}

// recvDecoded receives one message into m with recv. An error of the
// stream is returned as it is (io.EOF included); a request that cannot be
// decoded is a status already, since generated handlers return it as it is.
func recvDecoded(recv func(any) error, m any) error {
	var f rawFrame
	if err := recv(&f); err != nil {
		return err
	}
	return toStatus(decodeInto(f, m))
}

// rawReceiver is stream's receiver of raw frames, if it is the Service's
// own server's (decodingService): any other stream's codec would refuse a
// *rawFrame.
func rawReceiver(stream SessionStream) (decodingStream, bool) {
	g, ok := stream.(*grpc.GenericServerStream[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse])
	if !ok {
		return decodingStream{}, false
	}
	d, ok := g.ServerStream.(decodingStream)
	return d, ok
}

// decodingStream decodes the messages it receives itself; see rawFrame.
type decodingStream struct{ grpc.ServerStream }

// RecvMsg decodes into m, or passes the bytes through for a *rawFrame, for
// a caller that decodes them elsewhere (Service.firstMessage).
func (s decodingStream) RecvMsg(m any) error {
	if f, ok := m.(*rawFrame); ok {
		return s.ServerStream.RecvMsg(f)
	}
	return recvDecoded(s.ServerStream.RecvMsg, m)
}

// quoteID quotes an id for an error message, cut short: the id is the
// caller's, and echoing a megabyte of it helps nobody.
func quoteID(id string) string {
	const keep = 64
	if len(id) <= keep {
		return strconv.Quote(id)
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return strconv.Quote(id[:cut]) + fmt.Sprintf("... (%d bytes)", len(id))
}

// undecodable says whether err, from a Recv, is recvDecoded's refusal of a
// request rather than the stream's end.
func undecodable(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.InvalidArgument
}
