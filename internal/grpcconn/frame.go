package grpcconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HTTP/2 frame types and flags (RFC 9113, section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// Settings this client sends or reads.
const (
	settingHeaderTableSize   = 0x1
	settingEnablePush        = 0x2
	settingInitialWindowSize = 0x4
	settingMaxFrameSize      = 0x5
	settingMaxHeaderListSize = 0x6
)

// Error codes (RFC 9113, section 7).
const (
	codeProtocol      = 0x1
	codeFlowControl   = 0x3
	codeFrameSize     = 0x6
	codeRefusedStream = 0x7
	codeCancel        = 0x8
	codeCompression   = 0x9
	codeEnhanceCalm   = 0xb
	codeInadequateSec = 0xc
)

const (
	frameHeaderLen = 9
	// defaultMaxFrame is the largest frame either side may send until
	// told otherwise, and all this client ever accepts: it advertises no
	// larger size.
	defaultMaxFrame = 1 << 14
	// defaultWindow is HTTP/2's initial flow-control window.
	defaultWindow = 65535
	maxWindow     = 1<<31 - 1
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

type frameHeader struct {
	length   uint32
	typ      uint8
	flags    uint8
	streamID uint32
}

func parseFrameHeader(b []byte) frameHeader {
	return frameHeader{
		length:   uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		typ:      b[3],
		flags:    b[4],
		streamID: binary.BigEndian.Uint32(b[5:9]) & maxWindow,
	}
}

func appendFrameHeader(b []byte, length int, typ, flags uint8, streamID uint32) []byte {
	b = append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags)
	return binary.BigEndian.AppendUint32(b, streamID)
}

// connError is an error of the connection as a whole (RFC 9113, section
// 5.4.1): the client sends GOAWAY with code and closes.
type connError struct {
	code uint32
	msg  string
}

func (e *connError) Error() string { return fmt.Sprintf("HTTP/2 error %#x: %s", e.code, e.msg) }

func protocolError(format string, args ...any) error {
	return &connError{code: codeProtocol, msg: fmt.Sprintf(format, args...)}
}

// frameReader reads frames from r into one buffer: a frame's payload is
// valid until the next read.
type frameReader struct {
	r   io.Reader
	hdr [frameHeaderLen]byte
	buf []byte
}

// next reads one frame.
func (fr *frameReader) next() (frameHeader, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return frameHeader{}, nil, err
	}
	return fr.payload(parseFrameHeader(fr.hdr[:]))
}

// payload reads the payload of the frame whose header, h, was just read.
func (fr *frameReader) payload(h frameHeader) (frameHeader, []byte, error) {
	if h.length > defaultMaxFrame {
		return h, nil, &connError{code: codeFrameSize, msg: fmt.Sprintf("frame of %d bytes, more than the %d advertised", h.length, defaultMaxFrame)}
	}
	if cap(fr.buf) < int(h.length) {
		fr.buf = make([]byte, defaultMaxFrame)
	}
	p := fr.buf[:h.length]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	return h, p, nil
}

// A decoded frame: one of the types below, or nil for a frame this client
// ignores (PRIORITY, unknown types).
type (
	dataFrame struct {
		streamID  uint32
		data      []byte
		flowLen   uint32 // what the frame counts against flow control, padding included
		endStream bool
	}
	headersFrame struct {
		streamID   uint32
		fragment   []byte
		endStream  bool
		endHeaders bool
	}
	continuationFrame struct {
		streamID   uint32
		fragment   []byte
		endHeaders bool
	}
	rstStreamFrame struct {
		streamID uint32
		code     uint32
	}
	settingsFrame struct {
		ack      bool
		settings [][2]uint32
	}
	pingFrame struct {
		ack  bool
		data [8]byte
	}
	goAwayFrame struct {
		lastStreamID uint32
		code         uint32
		debug        []byte
	}
	windowUpdateFrame struct {
		streamID  uint32
		increment uint32
	}
)

// decodeFrame checks a frame as RFC 9113 section 6 requires of a client
// and returns it decoded; slices in it alias p.
func decodeFrame(h frameHeader, p []byte) (any, error) {
	needStream := func() error {
		if h.streamID == 0 {
			return protocolError("frame type %d on stream 0", h.typ)
		}
		return nil
	}
	needConn := func() error {
		if h.streamID != 0 {
			return protocolError("frame type %d on stream %d", h.typ, h.streamID)
		}
		return nil
	}
	switch h.typ {
	case frameData:
		if err := needStream(); err != nil {
			return nil, err
		}
		data, err := unpad(h, p)
		if err != nil {
			return nil, err
		}
		return dataFrame{streamID: h.streamID, data: data, flowLen: h.length, endStream: h.flags&flagEndStream != 0}, nil
	case frameHeaders:
		if err := needStream(); err != nil {
			return nil, err
		}
		frag, err := unpad(h, p)
		if err != nil {
			return nil, err
		}
		if h.flags&flagPriority != 0 {
			if len(frag) < 5 {
				return nil, protocolError("HEADERS too short for its priority")
			}
			frag = frag[5:]
		}
		return headersFrame{streamID: h.streamID, fragment: frag, endStream: h.flags&flagEndStream != 0, endHeaders: h.flags&flagEndHeaders != 0}, nil
	case frameContinuation:
		if err := needStream(); err != nil {
			return nil, err
		}
		return continuationFrame{streamID: h.streamID, fragment: p, endHeaders: h.flags&flagEndHeaders != 0}, nil
	case frameRSTStream:
		if err := needStream(); err != nil {
			return nil, err
		}
		if len(p) != 4 {
			return nil, &connError{code: codeFrameSize, msg: fmt.Sprintf("RST_STREAM of %d bytes", len(p))}
		}
		return rstStreamFrame{streamID: h.streamID, code: binary.BigEndian.Uint32(p)}, nil
	case frameSettings:
		if err := needConn(); err != nil {
			return nil, err
		}
		ack := h.flags&flagAck != 0
		if ack && len(p) != 0 || len(p)%6 != 0 {
			return nil, &connError{code: codeFrameSize, msg: fmt.Sprintf("SETTINGS of %d bytes", len(p))}
		}
		f := settingsFrame{ack: ack}
		for ; len(p) > 0; p = p[6:] {
			f.settings = append(f.settings, [2]uint32{uint32(binary.BigEndian.Uint16(p)), binary.BigEndian.Uint32(p[2:])})
		}
		return f, nil
	case framePing:
		if err := needConn(); err != nil {
			return nil, err
		}
		if len(p) != 8 {
			return nil, &connError{code: codeFrameSize, msg: fmt.Sprintf("PING of %d bytes", len(p))}
		}
		f := pingFrame{ack: h.flags&flagAck != 0}
		copy(f.data[:], p)
		return f, nil
	case frameGoAway:
		if err := needConn(); err != nil {
			return nil, err
		}
		if len(p) < 8 {
			return nil, &connError{code: codeFrameSize, msg: fmt.Sprintf("GOAWAY of %d bytes", len(p))}
		}
		return goAwayFrame{lastStreamID: binary.BigEndian.Uint32(p) & maxWindow, code: binary.BigEndian.Uint32(p[4:]), debug: p[8:]}, nil
	case frameWindowUpdate:
		if len(p) != 4 {
			return nil, &connError{code: codeFrameSize, msg: fmt.Sprintf("WINDOW_UPDATE of %d bytes", len(p))}
		}
		inc := binary.BigEndian.Uint32(p) & maxWindow
		if inc == 0 {
			return nil, protocolError("WINDOW_UPDATE of 0 on stream %d", h.streamID)
		}
		return windowUpdateFrame{streamID: h.streamID, increment: inc}, nil
	case framePushPromise:
		return nil, protocolError("PUSH_PROMISE, which this client disabled")
	default:
		return nil, nil
	}
}

// unpad strips a PADDED frame's padding.
func unpad(h frameHeader, p []byte) ([]byte, error) {
	if h.flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, protocolError("padding longer than frame type %d on stream %d", h.typ, h.streamID)
	}
	return p[1 : len(p)-int(p[0])], nil
}
