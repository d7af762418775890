package grpcconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// held is how many bytes of messages have arrived unread, prefixes included.
func (in *inbox) held() int {
	n := in.nprefix + len(in.part)
	for _, m := range in.msgs {
		n += 5 + len(m)
	}
	return n
}

// A message the inbox keeps is its own: the frame it arrived in may be
// written again at once (the frame reader reuses its buffer), and a
// caller of RecvBytes keeps slices of what it got (the client's Output
// data points into it).
func TestInboxMessagesOwnTheirBytes(t *testing.T) {
	frame := []byte{0, 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 2, 'd', 'e'}
	var in inbox
	in.add(frame, 1<<20)
	for i := range frame {
		frame[i] = 'z'
	}
	in.add([]byte{0, 0, 0, 0, 1, 'f'}, 1<<20)
	if len(in.msgs) != 3 || string(in.msgs[0]) != "abc" || string(in.msgs[1]) != "de" || string(in.msgs[2]) != "f" {
		t.Fatalf("messages %q after their frame was written again", in.msgs)
	}
	first := in.msgs[0]
	in.msgs = in.msgs[1:]
	in.add([]byte{0, 0, 0, 0, 3, 'g', 'h', 'i'}, 1<<20)
	if string(first) != "abc" {
		t.Fatalf("a message taken out became %q once another arrived", first)
	}
}

// Messages come out whole and in order however the frames cut them: in
// the prefix, at a boundary, with empty messages between; a compressed or
// oversized message is refused after the ones before it.
func TestInboxSplitsMessagesAtAnyCut(t *testing.T) {
	var wire []byte
	var want [][]byte
	for _, n := range []int{3, 0, 70000, 1, 0, 16384} {
		m := bytes.Repeat([]byte{byte(n)}, n)
		for i := range m {
			m[i] ^= byte(i / 3)
		}
		want = append(want, m)
		wire = append(wire, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(wire[len(wire)-4:], uint32(n))
		wire = append(wire, m...)
	}
	for _, cut := range []int{1, 2, 4, 5, 6, 7, 4096, 16384, len(wire)} {
		var in inbox
		for off := 0; off < len(wire); off += cut {
			in.add(wire[off:min(off+cut, len(wire))], 1<<20)
		}
		if in.pending() != (len(want) > 0) || in.partial() || in.bad != nil {
			t.Fatalf("cut %d: partial %v, bad %v", cut, in.partial(), in.bad)
		}
		if len(in.msgs) != len(want) {
			t.Fatalf("cut %d: %d messages, want %d", cut, len(in.msgs), len(want))
		}
		for i := range want {
			if !bytes.Equal(in.msgs[i], want[i]) {
				t.Fatalf("cut %d: message %d differs", cut, i)
			}
		}
	}
	for _, tc := range []struct {
		prefix []byte
		code   codes.Code
	}{
		{[]byte{1, 0, 0, 0, 1, 'x'}, codes.Internal},
		{[]byte{0, 0, 0, 0x10, 0}, codes.ResourceExhausted},
	} {
		var in inbox
		in.add(append([]byte{0, 0, 0, 0, 1, 'a'}, tc.prefix...), 1<<10)
		if len(in.msgs) != 1 || status.Code(in.bad.Err()) != tc.code {
			t.Errorf("prefix %v: %d messages before it, refused with %v, want 1 and %v", tc.prefix, len(in.msgs), in.bad, tc.code)
		}
	}
	var in inbox
	in.add([]byte{0, 0, 0}, 1<<10)
	if !in.partial() || !in.pending() {
		t.Error("a prefix cut short is not partial")
	}
}

// BenchmarkRecvOutput is the client's side of a terminal's output: full
// Output messages streamed by a grpc-go server.
func BenchmarkRecvOutput(b *testing.B) {
	data := make([]byte, 32<<10-16)
	n := b.N
	srv := &server{session: func(st sessionStream) error {
		if _, err := st.Recv(); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := st.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: &sandboxdv1.Output{Data: data}}}); err != nil {
				return err
			}
		}
		return nil
	}}
	c, _ := start(b, srv, grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(1<<20))
	s, err := c.NewStream(context.Background(), methodSession)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Send(stdin(nil)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < n; i++ {
		resp := &sandboxdv1.SessionResponse{}
		if err := s.Recv(resp); err != nil {
			b.Fatal(err)
		}
	}
}
