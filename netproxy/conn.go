package netproxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"time"
)

// How long, and for how many bytes, a connection refused with an HTTP
// error keeps reading after the answer is sent (see lingerClose).
const (
	lingerTime  = time.Second
	lingerBytes = 256 << 10
)

// handle serves one client connection until it is done; it closes c.
func (s *Server) handle(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	lim := &headLimiter{r: c, n: MaxHeadBytes}
	br := bufio.NewReader(lim)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == socksVersion {
		lim.unlimit()
		s.serveSOCKS(c, br)
		return
	}
	s.serveHTTP(c, br, lim)
}

// headLimiter ends input after n bytes while a message head is read, so
// that an endless head is cut off instead of buffered. A head within the
// limit never needs a byte past it, so hitting it means the head is too
// large. While limited it can also keep a copy of what it passes on.
type headLimiter struct {
	r   io.Reader
	n   int64 // bytes left; negative: no limit
	hit bool
	rec []byte // what was read since record, if recording
}

func (l *headLimiter) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		l.hit = true
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.rec != nil {
		l.rec = append(l.rec, p[:n]...)
	}
	return n, err
}

func (l *headLimiter) limit(n int64) { l.n, l.hit = max(n, 0), false }

// record starts keeping a copy of the input, beginning with pre.
func (l *headLimiter) record(pre []byte) { l.rec = append(make([]byte, 0, 4096), pre...) }

func (l *headLimiter) unlimit() { l.n, l.rec = -1, nil }

// join connects c to a new connection to to and splices the two; it
// closes c.
func (s *Server) join(c net.Conn, to netip.AddrPort) {
	defer c.Close()
	if err := s.charge(to.String()); err != nil {
		// The refusal has no protocol to be told in: the connection is
		// closed, and the denial says why.
		s.report("forward", err)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DialTimeout)
	up, err := s.dial(ctx, "tcp", to.String())
	cancel()
	if err != nil {
		s.refund()
		return
	}
	if !s.track(up) {
		return
	}
	defer s.untrack(up)
	splice(c, nil, up)
}

// splice copies between the client and upstream until both directions are
// done. br, if not nil, holds what the client sent past its handshake; it
// goes first.
func splice(c net.Conn, br *bufio.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := io.Copy(c, up)
		finish(c, up, err)
	}()
	var err error
	if br != nil && br.Buffered() > 0 {
		b, _ := br.Peek(br.Buffered())
		_, err = up.Write(b)
	}
	if err == nil {
		// From the connection itself, not br, so that two TCP
		// connections can be spliced in the kernel.
		_, err = io.Copy(up, c)
	}
	finish(up, c, err)
	<-done
}

// finish ends one direction of a splice. A clean end of input is passed on
// as a half-close, since protocols that send a request and then shut down
// their sending side still await the reply; a failure tears both
// connections down so that the other direction stops too.
func finish(dst, src net.Conn, err error) {
	if err == nil && closeWrite(dst) == nil {
		return
	}
	dst.Close()
	src.Close()
}

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return net.ErrClosed
}

// lingerClose shuts down sending on c and reads a little more before the
// caller closes it: closing a socket with unread input makes the kernel
// send a reset, which can destroy the error response before the client
// reads it (a refused upload has its body still in flight).
func lingerClose(c net.Conn) {
	closeWrite(c)
	c.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c, lingerBytes)
}
