package client

import (
	"google.golang.org/protobuf/encoding/protowire"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/grpcconn"
)

// decodeResponse decodes a SessionResponse from b, which is the caller's
// own: an Output's data is not copied out of b but shares it, as the
// generated decoder would copy every Output (up to 128 KiB) once more.
func decodeResponse(b []byte, resp *sandboxdv1.SessionResponse) error {
	if o, ok := outputOnly(b); ok {
		resp.Msg = &sandboxdv1.SessionResponse_Output{Output: o}
		return nil
	}
	if err := resp.UnmarshalVT(b); err != nil {
		return grpcconn.UnmarshalError(err)
	}
	return nil
}

// outputOnly decodes b if it is a SessionResponse made of one Output
// whose fields are the stream and the data, each at most once, as the
// daemon sends output; ok is false for anything else, which the generated
// decoder then decodes.
func outputOnly(b []byte) (_ *sandboxdv1.Output, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 2 || typ != protowire.BytesType {
		return nil, false
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, false
	}
	o := &sandboxdv1.Output{}
	var stream, data bool
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		if n < 0 {
			return nil, false
		}
		inner = inner[n:]
		switch {
		case num == 1 && typ == protowire.VarintType && !stream:
			v, n := protowire.ConsumeVarint(inner)
			if n < 0 {
				return nil, false
			}
			o.Stream, inner, stream = sandboxdv1.Output_Stream(int32(v)), inner[n:], true
		case num == 2 && typ == protowire.BytesType && !data:
			v, n := protowire.ConsumeBytes(inner)
			if n < 0 {
				return nil, false
			}
			o.Data, inner, data = v, inner[n:], true
		default:
			return nil, false
		}
	}
	return o, true
}
