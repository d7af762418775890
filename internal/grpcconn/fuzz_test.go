package grpcconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// serverBytes is what a server sends for one call on stream 1: its
// settings, then headers, one message and trailers.
func serverBytes(msg []byte, trailers ...string) []byte {
	var b []byte
	b = appendFrameHeader(b, 6, frameSettings, 0, 0)
	b = binary.BigEndian.AppendUint16(b, settingInitialWindowSize)
	b = binary.BigEndian.AppendUint32(b, 1<<20)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	b = appendFrameHeader(b, hb.Len(), frameHeaders, flagEndHeaders, 1)
	b = append(b, hb.Bytes()...)
	data := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	data = append(data, msg...)
	b = appendFrameHeader(b, len(data), frameData, 0, 1)
	b = append(b, data...)
	hb.Reset()
	for i := 0; i+1 < len(trailers); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: trailers[i], Value: trailers[i+1]})
	}
	b = appendFrameHeader(b, hb.Len(), frameHeaders, flagEndHeaders|flagEndStream, 1)
	return append(b, hb.Bytes()...)
}

// FuzzServerBytes: whatever a server sends, a call on the connection ends,
// with a reply or an error, and nothing panics. The corpus is in
// testdata/fuzz/FuzzServerBytes.
func FuzzServerBytes(f *testing.F) {
	ok := serverBytes([]byte{0x0a, 0x02, 's', '1'}, "grpc-status", "0")
	f.Add(ok)
	f.Add(serverBytes(nil, "grpc-status", "9", "grpc-message", "a%20b%", "grpc-status-details-bin", "CAkSAWI"))
	f.Add(ok[:len(ok)-3])
	padded := appendFrameHeader(nil, 4, frameData, flagPadded, 1)
	f.Add(append(append(ok[:15:15], padded...), 2, 0, 0, 0))
	ping := appendFrameHeader(append([]byte(nil), ok[:15]...), 8, framePing, 0, 0)
	f.Add(append(ping, 1, 2, 3, 4, 5, 6, 7, 8))
	goAway := appendFrameHeader(append([]byte(nil), ok[:15]...), 8, frameGoAway, 0, 0)
	f.Add(append(goAway, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		client, srv := net.Pipe()
		go io.Copy(io.Discard, srv)
		go func() {
			srv.Write(in)
			srv.Close()
		}()
		c := Start(client, Options{Window: 1 << 20})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info := &sandboxdv1.SessionInfo{}
		err := c.Invoke(ctx, "/sandboxd.v1.Sandboxd/Inspect", &sandboxdv1.InspectRequest{}, info)
		if ctx.Err() != nil {
			t.Fatalf("the call did not end: %v", err)
		}
	})
}

// FuzzFrameDecoder: the frame decoder takes any bytes without panicking,
// and what it decodes lies within the frame. The corpus is in
// testdata/fuzz/FuzzFrameDecoder.
func FuzzFrameDecoder(f *testing.F) {
	f.Add(serverBytes([]byte("x"), "grpc-status", "0"))
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := &frameReader{r: bytes.NewReader(in)}
		for {
			h, p, err := fr.next()
			if err != nil {
				return
			}
			f, err := decodeFrame(h, p)
			if err != nil {
				continue
			}
			if d, ok := f.(dataFrame); ok && (len(d.data) > len(p) || d.flowLen != uint32(len(p))) {
				t.Fatalf("DATA of %d bytes decoded to %d, counting %d", len(p), len(d.data), d.flowLen)
			}
		}
	})
}
