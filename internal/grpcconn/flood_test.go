//go:build linux

package grpcconn

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// socketPair is a connected pair of unix stream sockets.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// TestContinuationFloodFailsTheCall: a server that answers a call with a
// header block that never ends (HEADERS, then CONTINUATION frames without
// END_HEADERS) fails the call with an error naming it, once the block
// passes its bounds, rather than holding all it sent. The fake server
// sends four times the bound and then waits, so that a client without
// the bound waits out the deadline instead of filling the host's memory.
func TestContinuationFloodFailsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frag   int
		frames int
	}{
		{"16 KiB fragments", 16 << 10, 4 * maxHeaderBlock / (16 << 10)},
		{"empty fragments", 0, 4 * maxHeaderFrames},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, srv := socketPair(t)
			defer srv.Close()
			go func() {
				if _, err := io.ReadFull(srv, make([]byte, len(clientPreface))); err != nil {
					return
				}
				if _, err := srv.Write(appendFrameHeader(nil, 0, frameSettings, 0, 0)); err != nil {
					return
				}
				fr := &frameReader{r: srv}
				var id uint32
				for id == 0 {
					h, _, err := fr.next()
					if err != nil {
						return
					}
					if h.typ == frameHeaders {
						id = h.streamID
					}
				}
				// The client's later frames (a GOAWAY) go unread: a socket
				// buffer holds them.
				frag := make([]byte, tc.frag)
				b := append(appendFrameHeader(nil, tc.frag, frameHeaders, 0, id), frag...)
				for range tc.frames {
					b = append(append(b, appendFrameHeader(nil, tc.frag, frameContinuation, 0, id)...), frag...)
					if len(b) >= 1<<16 {
						if _, err := srv.Write(b); err != nil {
							return
						}
						b = b[:0]
					}
				}
				srv.Write(b)
			}()
			c := Start(client, Options{Window: 1 << 20})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.Invoke(ctx, methodInspect, &sandboxdv1.InspectRequest{}, &sandboxdv1.SessionInfo{})
			st := status.Convert(err)
			if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "header block of stream") {
				t.Fatalf("call ended with %v; want UNAVAILABLE naming the header block", err)
			}
			t.Logf("%v", err)
		})
	}
}
