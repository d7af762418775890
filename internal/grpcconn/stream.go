package grpcconn

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// noRST: a stream that ends sends no RST_STREAM.
const noRST = -1

// Stream is one call: its requests are sent with Send (SendLast or
// CloseSend for the last), its replies read with Recv. One goroutine may
// send and another receive at the same time.
type Stream struct {
	c       *Conn
	ctx     context.Context
	method  string
	stopCtx func() bool

	// id is given out when the stream's HEADERS are written (under c.wmu
	// and c.mu); opened says it has been.
	id      uint32
	opened  atomic.Bool
	endSent atomic.Bool
	// sendWindow is guarded by c.mu.
	sendWindow int64

	mu         sync.Mutex
	in         inbox
	gotHeaders bool
	done       bool
	st         *status.Status
	// Flow control of what the server sends: bytes received, consumed
	// (read as messages, or padding), and given back to its window.
	received, consumed, credited uint64
	recvWindow                   int64
	// notify has a value when in or done changed since Recv last looked.
	notify chan struct{}
}

// NewStream begins a call of method ("/package.Service/Method") that ends
// with ctx. Its HEADERS go out with its first message, in one write.
func (c *Conn) NewStream(ctx context.Context, method string) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	c.mu.Lock()
	err, goAway := c.err, c.goAway
	c.mu.Unlock()
	if err != nil {
		return nil, err.Err()
	}
	if goAway {
		return nil, status.Error(codes.Unavailable, "the server is going away")
	}
	s := &Stream{c: c, ctx: ctx, method: method, recvWindow: int64(c.opts.Window), notify: make(chan struct{}, 1)}
	// Under s.mu: the function may run at once, and its finish reads
	// stopCtx.
	s.mu.Lock()
	s.stopCtx = context.AfterFunc(ctx, func() {
		s.finish(status.FromContextError(ctx.Err()), codeCancel)
	})
	s.mu.Unlock()
	return s, nil
}

// Invoke makes a unary call.
func (c *Conn) Invoke(ctx context.Context, method string, req, resp proto.Message) error {
	s, err := c.NewStream(ctx, method)
	if err != nil {
		return err
	}
	defer s.Cancel()
	// An io.EOF means the stream is already over; Recv says why.
	if err := s.SendLast(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := s.Recv(resp); err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.Internal, "grpc: the server sent no reply to a unary call")
		}
		return err
	}
	return s.recvEnd()
}

// Send sends one request.
func (s *Stream) Send(m proto.Message) error { return s.send(m, false) }

// SendLast sends the last request and closes the sending side with it.
func (s *Stream) SendLast(m proto.Message) error { return s.send(m, true) }

// CloseSend closes the sending side: the server's Recv sees the end.
func (s *Stream) CloseSend() error { return s.write(nil, true) }

// Cancel ends the call, resetting the stream if the server has not ended
// it: what is still to come is not wanted.
func (s *Stream) Cancel() {
	s.finish(status.New(codes.Canceled, "grpc: the call was cancelled"), codeCancel)
}

func (s *Stream) send(m proto.Message, end bool) error {
	b, err := marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	if len(b)-5 > math.MaxUint32 {
		return status.Errorf(codes.ResourceExhausted, "grpc: message of %d bytes is too large to send", len(b)-5)
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	return s.write(b, end)
}

// vtMessage is a message with the code protoc-gen-go-vtproto generates
// (sandboxd.v1's are): it is encoded and decoded without the protobuf
// runtime's reflection, which sets a type up on its first use, a few
// hundred microseconds for a session's messages at every start of a
// short-lived client such as sandboxctl.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT(b []byte) (int, error)
	UnmarshalVT(b []byte) error
}

// marshal encodes m behind the 5 bytes of a gRPC message prefix, which it
// leaves for the caller to fill in. A vtMessage does not check that its
// strings are UTF-8: the daemon does, and names the field that is not.
func marshal(m proto.Message) ([]byte, error) {
	vt, ok := m.(vtMessage)
	if !ok {
		return proto.MarshalOptions{}.MarshalAppend(make([]byte, 5, 5+proto.Size(m)), m)
	}
	b := make([]byte, 5+vt.SizeVT())
	n, err := vt.MarshalToSizedBufferVT(b[5:])
	if err != nil {
		return nil, err
	}
	return b[:5+n], nil
}

// unmarshal decodes b into m.
func unmarshal(b []byte, m proto.Message) error {
	if vt, ok := m.(vtMessage); ok {
		proto.Reset(m)
		return vt.UnmarshalVT(b)
	}
	return proto.Unmarshal(b, m)
}

// write sends b as DATA frames as the server's windows allow, the last
// with END_STREAM when end is set. It returns io.EOF once the stream is
// over: Recv then says how it ended.
func (s *Stream) write(b []byte, end bool) error {
	c := s.c
	if s.endSent.Load() {
		return status.Error(codes.Internal, "grpc: send after the sending side was closed")
	}
	for {
		c.wmu.Lock()
		if err := s.openLocked(); err != nil {
			c.wmu.Unlock()
			return err
		}
		n, wake := c.take(s, len(b))
		if n < 0 {
			_ = c.bw.Flush()
			c.wmu.Unlock()
			return io.EOF
		}
		for n > 0 || len(b) == 0 {
			flags := uint8(0)
			if end && n == len(b) {
				flags = flagEndStream
				s.endSent.Store(true)
			}
			c.appendFrame(frameData, flags, s.id, b[:n])
			b = b[n:]
			if len(b) == 0 {
				break
			}
			n, wake = c.take(s, len(b))
		}
		_ = c.bw.Flush()
		c.wmu.Unlock()
		if len(b) == 0 && (!end || s.endSent.Load()) {
			return nil
		}
		if n == 0 {
			select {
			case <-wake:
			case <-s.ctx.Done():
			}
		}
	}
}

// take reserves up to want bytes of the send windows for s: how many
// (0 with the channel to wait on for more), or -1 once s is over.
func (c *Conn) take(s *Stream, want int) (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.streams[s.id] != s {
		return -1, nil
	}
	n := min(int64(want), c.sendWindow, s.sendWindow, int64(c.peerFrame))
	if n <= 0 {
		if want == 0 {
			return 0, nil
		}
		return 0, c.wake
	}
	c.sendWindow -= n
	s.sendWindow -= n
	return int(n), nil
}

// openLocked writes s's HEADERS, once; the caller holds c.wmu and
// flushes.
func (s *Stream) openLocked() error {
	if s.opened.Load() {
		return nil
	}
	c := s.c
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err.Err()
	}
	s.mu.Lock()
	done, st := s.done, s.st
	s.mu.Unlock()
	if done {
		c.mu.Unlock()
		return st.Err()
	}
	if c.goAway || c.nextID > maxWindow {
		// Stream ids run out after a billion calls: the next connection
		// starts afresh.
		c.goAway = true
		c.mu.Unlock()
		return status.Error(codes.Unavailable, "the server is going away")
	}
	s.id = c.nextID
	c.nextID += 2
	c.streams[s.id] = s
	s.sendWindow = c.peerWindow
	maxFrame := int(c.peerFrame)
	c.mu.Unlock()
	s.opened.Store(true)

	c.hblock = c.hblock[:0]
	if c.tableUpdate {
		c.hblock = append(c.hblock, headerTableUpdate)
		c.tableUpdate, c.tableEmptied = false, true
	}
	field := func(name, value string) {
		c.hblock = appendHeaderField(c.hblock, name, value)
	}
	field(":method", "POST")
	field(":scheme", "http")
	field(":path", s.method)
	field(":authority", c.opts.Authority)
	field("content-type", "application/grpc")
	field("te", "trailers")
	for _, kv := range c.opts.Metadata {
		field(kv[0], kv[1])
	}
	if dl, ok := s.ctx.Deadline(); ok {
		field("grpc-timeout", encodeTimeout(time.Until(dl)))
	}
	block := c.hblock
	typ := uint8(frameHeaders)
	for {
		n := min(len(block), maxFrame)
		flags := uint8(0)
		if n == len(block) {
			flags = flagEndHeaders
		}
		c.appendFrame(typ, flags, s.id, block[:n])
		block = block[n:]
		if len(block) == 0 {
			return nil
		}
		typ = frameContinuation
	}
}

// Recv reads the next reply into m. It returns io.EOF when the server
// ended the call with status OK, and the status as an error otherwise.
func (s *Stream) Recv(m proto.Message) error {
	msg, err := s.RecvBytes()
	if err != nil {
		return err
	}
	if err := unmarshal(msg, m); err != nil {
		return UnmarshalError(err)
	}
	return nil
}

// RecvBytes is Recv without the decoding: it returns the next reply's
// encoding, which is the caller's (nothing else refers to it), so that
// what is decoded from it may share its bytes.
func (s *Stream) RecvBytes() ([]byte, error) {
	if err := s.ensureOpen(); err != nil {
		return nil, err
	}
	for {
		msg, err := s.next()
		if err != nil {
			return nil, err
		}
		if msg != nil {
			return msg, nil
		}
		// The end of ctx ends the stream, which notifies too.
		<-s.notify
	}
}

// UnmarshalError is the status of a reply that could not be decoded.
func UnmarshalError(err error) error {
	return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
}

// next returns the next whole message if there is one, nil if Recv must
// wait, or how the stream ended.
func (s *Stream) next() ([]byte, error) {
	s.mu.Lock()
	if len(s.in.msgs) > 0 {
		// The buffer is the message's own, which nothing here writes
		// again: a caller of RecvBytes may keep slices of it.
		msg := s.in.msgs[0]
		s.in.msgs[0] = nil
		s.in.msgs = s.in.msgs[1:]
		s.consumed += 5 + uint64(len(msg))
		credit := s.creditLocked(s.consumed)
		s.mu.Unlock()
		s.sendCredit(credit)
		return msg, nil
	}
	if s.in.bad != nil {
		return s.fail(s.in.bad)
	}
	if s.done {
		st, partial := s.st, s.in.partial()
		s.mu.Unlock()
		if st.Code() != codes.OK {
			return nil, st.Err()
		}
		if partial {
			return nil, status.Error(codes.Internal, "grpc: the stream ended inside a message")
		}
		return nil, io.EOF
	}
	// Recv waits for a message not yet whole: what has arrived is as good
	// as read, or a message larger than the window would never arrive.
	credit := s.creditLocked(s.received)
	s.mu.Unlock()
	s.sendCredit(credit)
	return nil, nil
}

// fail ends the stream with st; the caller holds s.mu, which fail releases.
func (s *Stream) fail(st *status.Status) ([]byte, error) {
	s.mu.Unlock()
	s.finish(st, codeCancel)
	return nil, st.Err()
}

// creditLocked says how much to give back to the stream's window to bring
// what was given back up to target: nothing until that is a quarter of the
// window, so that updates come in batches.
func (s *Stream) creditLocked(target uint64) uint32 {
	if s.done || target < s.credited+uint64(s.c.opts.Window/4) {
		return 0
	}
	n := target - s.credited
	s.credited = target
	s.recvWindow += int64(n)
	return uint32(n)
}

func (s *Stream) sendCredit(n uint32) {
	if n > 0 {
		s.c.writeWindowUpdate(s.id, n)
	}
}

// recvEnd waits for the end of a call that has had its one reply.
func (s *Stream) recvEnd() error {
	for {
		s.mu.Lock()
		done, st, more := s.done, s.st, s.in.pending()
		s.mu.Unlock()
		if more {
			s.Cancel()
			return status.Error(codes.Internal, "grpc: more than one reply to a unary call")
		}
		if done {
			return st.Err()
		}
		<-s.notify
	}
}

func (s *Stream) ensureOpen() error {
	if s.opened.Load() {
		return nil
	}
	s.c.wmu.Lock()
	defer s.c.wmu.Unlock()
	err := s.openLocked()
	_ = s.c.bw.Flush()
	return err
}

// onData takes a DATA frame for s, in the reading goroutine.
func (s *Stream) onData(f dataFrame) error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.recvWindow -= int64(f.flowLen)
	if s.recvWindow < 0 {
		s.mu.Unlock()
		return &connError{code: codeFlowControl, msg: "DATA beyond the stream's window"}
	}
	s.in.add(f.data, s.c.opts.MaxRecvMsgSize)
	s.received += uint64(f.flowLen)
	s.consumed += uint64(f.flowLen) - uint64(len(f.data))
	s.mu.Unlock()
	s.signal()
	if f.endStream {
		s.finish(status.New(codes.Internal, "grpc: the server ended the stream without its status"), noRST)
	}
	return nil
}

// onHeaders takes a header block for s, in the reading goroutine: the
// reply's headers, then its trailers, or both in one (a call answered
// with its status alone).
func (s *Stream) onHeaders(fields []headerField, end bool) {
	s.mu.Lock()
	first := !s.gotHeaders
	s.gotHeaders = true
	s.mu.Unlock()
	if first {
		if st := replyHeadersStatus(fields); st != nil {
			s.finish(st, codeProtocol)
			return
		}
	}
	if !end {
		if !first {
			s.finish(status.New(codes.Internal, "grpc: trailers that do not end the stream"), codeProtocol)
		}
		return
	}
	// A server done before the client's side of the stream is resets the
	// stream itself (grpc-go does), so the client need not.
	s.finish(trailerStatus(fields), noRST)
}

func (s *Stream) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// finish ends the stream with st, once, resetting it with rst unless that
// is noRST.
func (s *Stream) finish(st *status.Status, rst int) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done, s.st = true, st
	stop := s.stopCtx
	s.mu.Unlock()
	s.signal()
	stop()
	c := s.c
	c.mu.Lock()
	id := s.id
	if id != 0 && c.streams[id] == s {
		delete(c.streams, id)
	} else {
		// Not open, or already taken off by a broken connection or a
		// GOAWAY: there is nothing to reset.
		rst = noRST
	}
	c.wakeLocked()
	c.mu.Unlock()
	if rst != noRST {
		c.writeRSTStream(id, uint32(rst))
	}
}

// inbox splits what a stream's DATA frames carry into messages as it
// arrives, each into a buffer of its own filled once: one buffer appended
// to and sliced from the front grew by copying every message still unread
// behind it, up to the 1 MiB window each time.
type inbox struct {
	// msgs are the whole messages not yet read, oldest first.
	msgs [][]byte
	// prefix is the length prefix of the message arriving, nprefix how
	// much of it has; part is the message, want its length.
	prefix  [5]byte
	nprefix int
	part    []byte
	want    int
	// bad is why the message after msgs cannot be read (compressed, or
	// beyond the limit); nothing after it is kept.
	bad *status.Status
}

// firstAlloc bounds what a message's prefix alone makes the client
// allocate: a longer message grows as its bytes come.
const firstAlloc = 1 << 20

func (in *inbox) add(data []byte, maxMsg int) {
	for len(data) > 0 && in.bad == nil {
		if in.nprefix < len(in.prefix) {
			k := copy(in.prefix[in.nprefix:], data)
			in.nprefix += k
			data = data[k:]
			if in.nprefix < len(in.prefix) {
				return
			}
			n := uint64(binary.BigEndian.Uint32(in.prefix[1:5]))
			switch {
			case in.prefix[0] != 0:
				in.bad = status.New(codes.Internal, "grpc: compressed reply, which this client did not ask for")
				return
			case n > uint64(maxMsg):
				in.bad = status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, maxMsg)
				return
			}
			in.want = int(n)
			in.part = make([]byte, 0, min(in.want, firstAlloc))
		}
		k := min(in.want-len(in.part), len(data))
		in.part = append(in.part, data[:k]...)
		data = data[k:]
		if len(in.part) == in.want {
			in.msgs = append(in.msgs, in.part)
			in.part, in.nprefix = nil, 0
		}
	}
}

// partial says a message has begun to arrive and is not whole.
func (in *inbox) partial() bool { return in.nprefix > 0 }

// pending says something arrived that has not been read.
func (in *inbox) pending() bool { return len(in.msgs) > 0 || in.partial() || in.bad != nil }
