package grpcconn

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// replyHeadersStatus checks a reply's first header block: nil if it is a
// gRPC reply, or the status of the call if not, from the HTTP status as
// gRPC's HTTP/2 protocol maps it.
func replyHeadersStatus(fields []headerField) *status.Status {
	var httpStatus, contentType string
	for _, f := range fields {
		switch f.Name {
		case ":status":
			httpStatus = f.Value
		case "content-type":
			contentType = f.Value
		}
	}
	if httpStatus == "200" && isGRPCContentType(contentType) {
		return nil
	}
	code := codes.Unknown
	switch httpStatus {
	case "200":
		code = codes.Internal
	case "400":
		code = codes.Internal
	case "401":
		code = codes.Unauthenticated
	case "403":
		code = codes.PermissionDenied
	case "404":
		code = codes.Unimplemented
	case "429", "502", "503", "504":
		code = codes.Unavailable
	}
	return status.Newf(code, "unexpected HTTP status %q, content-type %q: not a gRPC reply", httpStatus, contentType)
}

func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// trailerStatus is the call's status from its trailers: grpc-status,
// grpc-message, and the details of grpc-status-details-bin.
func trailerStatus(fields []headerField) *status.Status {
	code, msg, details := "", "", ""
	for _, f := range fields {
		switch f.Name {
		case "grpc-status":
			code = f.Value
		case "grpc-message":
			msg = decodeGRPCMessage(f.Value)
		case "grpc-status-details-bin":
			details = f.Value
		}
	}
	if code == "" {
		return status.New(codes.Internal, "grpc: the server ended the stream without a grpc-status")
	}
	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return status.Newf(codes.Internal, "grpc: malformed grpc-status %q", code)
	}
	if details == "" {
		return status.New(codes.Code(n), msg)
	}
	enc := base64.StdEncoding
	if len(details)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(details)
	if err != nil {
		return status.Newf(codes.Internal, "grpc: malformed grpc-status-details-bin: %v", err)
	}
	p := &spb.Status{}
	if err := proto.Unmarshal(b, p); err != nil {
		return status.Newf(codes.Internal, "grpc: malformed grpc-status-details-bin: %v", err)
	}
	if uint64(p.GetCode()) != n {
		return status.Newf(codes.Internal, "grpc: grpc-status %d and its details' code %d differ", n, p.GetCode())
	}
	return status.FromProto(p)
}

// decodeGRPCMessage undoes grpc-message's percent-encoding; a malformed
// escape is kept as it is.
func decodeGRPCMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// encodeTimeout is grpc-timeout for the time d left: at most eight
// digits, in the finest unit that holds it, rounded up.
func encodeTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		v := (d + u.unit - 1) / u.unit
		if v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(min((d+time.Hour-1)/time.Hour, 1e8-1)), 10) + "H"
}
