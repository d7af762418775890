// Package grpcconn is a gRPC client connection: gRPC's calls spoken as
// HTTP/2 over cleartext on one connection a caller has already dialled,
// with no more of HTTP/2 than a gRPC client uses. Linking grpc-go's client
// costs every start of a program about as much as the rest of sandboxctl's
// start together, most of it for what a client of one local daemon never
// uses: name resolution, load balancing, TLS, net/http.
package grpcconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Options are a connection's settings.
type Options struct {
	// Window is the flow-control window advertised per stream and for the
	// connection as a whole; 0 means HTTP/2's 64 KiB.
	Window uint32
	// MaxRecvMsgSize bounds one received message; 0 means 4 MiB, as in
	// grpc-go.
	MaxRecvMsgSize int
	// Authority is the :authority of every call.
	Authority string
	// Metadata is sent with every call, as name and value pairs; names
	// are lower case, as HTTP/2 requires.
	Metadata [][2]string
}

// ErrClosedEarly: the server closed the connection without a byte, which
// sandboxd does to a caller at its quota of connections.
var ErrClosedEarly = errors.New("connection closed before the server spoke")

// NotHTTP2Error: the server's first bytes are not an HTTP/2 SETTINGS frame.
type NotHTTP2Error struct {
	// Answer is what the server sent first, at most a frame header's length.
	Answer []byte
}

func (e *NotHTTP2Error) Error() string {
	return fmt.Sprintf("the server does not speak HTTP/2: it answered %q", e.Answer)
}

// Conn is a client connection. Its methods may be called concurrently.
type Conn struct {
	nc   net.Conn
	opts Options

	// wmu orders writes: a frame is written whole, and a stream's id is
	// given out in the order its HEADERS are written, as HTTP/2 requires.
	wmu sync.Mutex
	bw  *bufio.Writer
	// hblock is a HEADERS' block being written. tableUpdate is set when
	// the next one is to begin with headerTableUpdate, tableEmptied once
	// one has.
	hblock       []byte
	tableUpdate  bool
	tableEmptied bool
	wbuf         []byte

	// first is closed once the server's first frame header is read, or
	// reading it failed (firstErr).
	first    chan struct{}
	firstErr error

	mu      sync.Mutex
	streams map[uint32]*Stream
	nextID  uint32
	// wake is closed, and replaced, when a waiting sender may go on: a
	// send window grew, a stream ended, the connection broke.
	wake chan struct{}
	// What the server allows: the connection's send window, each new
	// stream's, and the frame size. A limit on concurrent streams is not
	// waited for: a stream beyond it is refused (Unavailable).
	sendWindow int64
	peerWindow int64
	peerFrame  uint32
	// goAway is set once the server said it takes no new streams.
	goAway bool
	// err is set once the connection is broken or closed; it is the status
	// of every stream still open then and of every later one.
	err *status.Status
	// recvUnacked is what the connection received and has not yet given
	// back to the server's window.
	recvUnacked uint32

	// Read by the reading goroutine alone.
	hdec      *hpackDecoder
	hdrStream uint32
	hdrBlock  []byte
	hdrFrames int
	hdrEnd    bool
	inHeaders bool
}

// Start begins the connection on nc: it sends the client's preface and
// settings at once, without waiting for the server's, and reads the
// server's frames from then on. Calls may be made right away. Start owns
// nc from then on; Close closes it.
func Start(nc net.Conn, opts Options) *Conn {
	if opts.Window < defaultWindow {
		opts.Window = defaultWindow
	}
	if opts.MaxRecvMsgSize <= 0 {
		opts.MaxRecvMsgSize = 4 << 20
	}
	c := &Conn{
		nc:         nc,
		opts:       opts,
		bw:         bufio.NewWriterSize(nc, 32<<10),
		first:      make(chan struct{}),
		streams:    map[uint32]*Stream{},
		nextID:     1,
		wake:       make(chan struct{}),
		sendWindow: defaultWindow,
		peerWindow: defaultWindow,
		peerFrame:  defaultMaxFrame,
	}
	c.hdec = newHPACKDecoder()

	b := append([]byte(nil), clientPreface...)
	// The header list bound told, so that a server holds its headers to
	// it rather than have the call fail once they are sent.
	settings := [][2]uint32{{settingEnablePush, 0}, {settingInitialWindowSize, opts.Window}, {settingMaxHeaderListSize, maxHeaderList}}
	b = appendFrameHeader(b, 6*len(settings), frameSettings, 0, 0)
	for _, s := range settings {
		b = binary.BigEndian.AppendUint16(b, uint16(s[0]))
		b = binary.BigEndian.AppendUint32(b, s[1])
	}
	if opts.Window > defaultWindow {
		b = appendFrameHeader(b, 4, frameWindowUpdate, 0, 0)
		b = binary.BigEndian.AppendUint32(b, opts.Window-defaultWindow)
	}
	// A failed write shows again as a failed read, which says more.
	c.wmu.Lock()
	_, _ = c.bw.Write(b)
	_ = c.bw.Flush()
	c.wmu.Unlock()
	go c.readLoop()
	return c
}

// FirstFrame is closed once the server's first frame header has arrived,
// or the connection ended before it; FirstErr then says which.
func (c *Conn) FirstFrame() <-chan struct{} { return c.first }

// FirstErr is nil if the server began as an HTTP/2 server does, with a
// SETTINGS frame; otherwise a *NotHTTP2Error, ErrClosedEarly, or the read
// error. Valid once FirstFrame is closed.
func (c *Conn) FirstErr() error { return c.firstErr }

// Usable says whether a new call may go over this connection: it is not
// broken or closed, and the server has not said it takes no more.
func (c *Conn) Usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.goAway
}

// Close closes the connection; calls still on it fail with Canceled.
func (c *Conn) Close() error {
	c.fail(status.New(codes.Canceled, "grpc: the client connection is closing"))
	return nil
}

// fail breaks the connection with st, which every open stream ends with.
func (c *Conn) fail(st *status.Status) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = st
	streams := c.streams
	c.streams = map[uint32]*Stream{}
	c.wakeLocked()
	c.mu.Unlock()
	c.nc.Close()
	for _, s := range streams {
		s.finish(st, noRST)
	}
}

func (c *Conn) wakeLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// readLoop reads and handles the server's frames until the connection
// ends.
func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 32<<10)
	fr := &frameReader{r: br}
	n, err := io.ReadFull(br, fr.hdr[:])
	switch {
	case n == frameHeaderLen && fr.hdr[3] == frameSettings:
	case n > 0:
		c.firstErr = &NotHTTP2Error{Answer: append([]byte(nil), fr.hdr[:n]...)}
	case errors.Is(err, io.EOF):
		c.firstErr = ErrClosedEarly
	default:
		c.firstErr = err
	}
	close(c.first)
	if c.firstErr != nil {
		c.fail(status.New(codes.Unavailable, "connection error: "+c.firstErr.Error()))
		return
	}
	h, p, err := fr.payload(parseFrameHeader(fr.hdr[:]))
	for err == nil {
		err = c.handle(h, p)
		if err == nil {
			h, p, err = fr.next()
		}
	}
	var ce *connError
	if errors.As(err, &ce) {
		c.writeGoAway(ce.code, ce.msg)
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed the connection")
	}
	c.fail(status.New(codes.Unavailable, "connection error: "+err.Error()))
}

func (c *Conn) handle(h frameHeader, p []byte) error {
	f, err := decodeFrame(h, p)
	if err != nil {
		return err
	}
	if c.inHeaders {
		cf, ok := f.(continuationFrame)
		if !ok || cf.streamID != c.hdrStream {
			return protocolError("frame type %d on stream %d inside a header block of stream %d", h.typ, h.streamID, c.hdrStream)
		}
		if err := c.growHeaderBlock(cf.fragment); err != nil {
			return err
		}
		if cf.endHeaders {
			return c.headerBlockDone()
		}
		return nil
	}
	switch f := f.(type) {
	case dataFrame:
		c.creditConn(f.flowLen)
		if s := c.stream(f.streamID); s != nil {
			return s.onData(f)
		}
	case headersFrame:
		c.hdrStream, c.hdrBlock, c.hdrFrames, c.hdrEnd = f.streamID, c.hdrBlock[:0], 0, f.endStream
		if err := c.growHeaderBlock(f.fragment); err != nil {
			return err
		}
		if f.endHeaders {
			return c.headerBlockDone()
		}
		c.inHeaders = true
	case continuationFrame:
		return protocolError("CONTINUATION outside a header block")
	case rstStreamFrame:
		if s := c.stream(f.streamID); s != nil {
			st := rstStatus(f.code)
			// A server resets a stream whose deadline passed with CANCEL,
			// and its deadline and the client's pass at about the same
			// time: the reset may come before the client's own timer
			// fires. As grpc-go's client does, a cancel at or after the
			// deadline is the deadline.
			if d, ok := s.ctx.Deadline(); ok && st.Code() == codes.Canceled && !time.Now().Before(d) {
				st = status.New(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
			}
			s.finish(st, noRST)
		}
	case settingsFrame:
		if !f.ack {
			return c.applySettings(f.settings)
		}
	case pingFrame:
		if !f.ack {
			c.writeFrame(framePing, flagAck, 0, f.data[:])
		}
	case goAwayFrame:
		c.onGoAway(f)
	case windowUpdateFrame:
		return c.onWindowUpdate(f)
	}
	return nil
}

// growHeaderBlock adds a HEADERS or CONTINUATION fragment to the header
// block being read. A server that sends more than maxHeaderBlock bytes, or
// maxHeaderFrames frames (empty ones cost no memory but the client's CPU
// for as long as they come), is misbehaving: the block is never decoded,
// and the connection, whose decoder state is lost with it, fails.
func (c *Conn) growHeaderBlock(fragment []byte) error {
	c.hdrFrames++
	if len(c.hdrBlock)+len(fragment) > maxHeaderBlock || c.hdrFrames > maxHeaderFrames {
		return &connError{code: codeEnhanceCalm, msg: fmt.Sprintf("header block of stream %d larger than %d bytes or %d frames", c.hdrStream, maxHeaderBlock, maxHeaderFrames)}
	}
	c.hdrBlock = append(c.hdrBlock, fragment...)
	return nil
}

// maxHeaderBlock and maxHeaderFrames bound one header block as the server
// sends it: far above the daemon's few KiB of trailers in one or two
// frames.
const (
	maxHeaderBlock  = 1 << 20
	maxHeaderFrames = 1024
)

func (c *Conn) headerBlockDone() error {
	c.inHeaders = false
	fields, err := c.hdec.decode(c.hdrBlock)
	if err != nil {
		return &connError{code: codeCompression, msg: err.Error()}
	}
	if s := c.stream(c.hdrStream); s != nil {
		s.onHeaders(fields, c.hdrEnd)
	}
	return nil
}

func (c *Conn) stream(id uint32) *Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// creditConn gives what the connection received back to the server's
// window, in batches: each stream's own window bounds what it holds.
func (c *Conn) creditConn(n uint32) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.recvUnacked += n
	credit := c.recvUnacked
	if credit < c.opts.Window/4 {
		credit = 0
	} else {
		c.recvUnacked = 0
	}
	c.mu.Unlock()
	if credit > 0 {
		c.writeWindowUpdate(0, credit)
	}
}

func (c *Conn) applySettings(settings [][2]uint32) error {
	for _, s := range settings {
		if s[0] == settingHeaderTableSize && s[1] < headerTableSize {
			c.wmu.Lock()
			c.tableUpdate = !c.tableEmptied
			c.wmu.Unlock()
		}
	}
	c.mu.Lock()
	for _, s := range settings {
		switch v := s[1]; s[0] {
		case settingInitialWindowSize:
			if v > maxWindow {
				c.mu.Unlock()
				return &connError{code: codeFlowControl, msg: fmt.Sprintf("initial window of %d", v)}
			}
			delta := int64(v) - c.peerWindow
			c.peerWindow = int64(v)
			for _, st := range c.streams {
				st.sendWindow += delta
			}
		case settingMaxFrameSize:
			if v < defaultMaxFrame || v > 1<<24-1 {
				c.mu.Unlock()
				return protocolError("max frame size of %d", v)
			}
			c.peerFrame = v
		}
	}
	c.wakeLocked()
	c.mu.Unlock()
	c.writeFrame(frameSettings, flagAck, 0, nil)
	return nil
}

func (c *Conn) onGoAway(f goAwayFrame) {
	c.mu.Lock()
	c.goAway = true
	var refused []*Stream
	for id, s := range c.streams {
		if id > f.lastStreamID {
			refused = append(refused, s)
			delete(c.streams, id)
		}
	}
	c.wakeLocked()
	c.mu.Unlock()
	msg := "the server is going away"
	if len(f.debug) > 0 {
		msg += ": " + string(f.debug)
	}
	for _, s := range refused {
		s.finish(status.New(codes.Unavailable, msg), noRST)
	}
}

func (c *Conn) onWindowUpdate(f windowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.streamID == 0 {
		c.sendWindow += int64(f.increment)
		if c.sendWindow > maxWindow {
			return &connError{code: codeFlowControl, msg: "connection window over 2^31-1"}
		}
	} else if s := c.streams[f.streamID]; s != nil {
		s.sendWindow += int64(f.increment)
	}
	c.wakeLocked()
	return nil
}

// writeFrame writes one frame and flushes it. A failed write is left for
// the reading side to report, which sees the connection end too.
func (c *Conn) writeFrame(typ, flags uint8, streamID uint32, payload []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.appendFrame(typ, flags, streamID, payload)
	_ = c.bw.Flush()
}

// appendFrame buffers one frame; the caller holds wmu and flushes.
func (c *Conn) appendFrame(typ, flags uint8, streamID uint32, payload []byte) {
	c.wbuf = appendFrameHeader(c.wbuf[:0], len(payload), typ, flags, streamID)
	_, _ = c.bw.Write(c.wbuf)
	_, _ = c.bw.Write(payload)
}

func (c *Conn) writeWindowUpdate(streamID, n uint32) {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], n)
	c.writeFrame(frameWindowUpdate, 0, streamID, p[:])
}

func (c *Conn) writeRSTStream(streamID, code uint32) {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], code)
	c.writeFrame(frameRSTStream, 0, streamID, p[:])
}

// writeGoAway tells the server why the client ends the connection. The
// last stream it names is 0: a client processes no streams the server
// starts.
func (c *Conn) writeGoAway(code uint32, msg string) {
	p := binary.BigEndian.AppendUint32(nil, 0)
	p = binary.BigEndian.AppendUint32(p, code)
	c.writeFrame(frameGoAway, 0, 0, append(p, msg...))
}

// rstStatus is the status of a stream the server reset, as grpc-go maps
// HTTP/2 error codes.
func rstStatus(code uint32) *status.Status {
	c := codes.Internal
	switch code {
	case codeRefusedStream:
		c = codes.Unavailable
	case codeCancel:
		c = codes.Canceled
	case codeEnhanceCalm:
		c = codes.ResourceExhausted
	case codeInadequateSec:
		c = codes.PermissionDenied
	}
	return status.Newf(c, "stream terminated by RST_STREAM with error code: %d", code)
}
