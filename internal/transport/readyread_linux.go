//go:build linux

package transport

import (
	"errors"
	"io"
	"net"
	"syscall"

	"google.golang.org/grpc/mem"
)

// readingConn is an admitted connection that grpc reads as it reads a
// bare socket (ReadOnReady).
type readingConn struct {
	admittedConn
	readyRead
}

func admitted(c net.Conn, release func()) net.Conn {
	return &readingConn{admittedConn: admittedConn{Conn: c, release: release}}
}

// readyRead is what readingConn.ReadOnReady keeps between reads. One
// goroutine reads a connection at a time (grpc's reader), so the state of
// a read lives here and the callback is made once, not at every read.
type readyRead struct {
	started bool
	raw     syscall.RawConn // nil: the connection is not a unix socket
	doRead  func(fd uintptr) bool

	size int
	pool mem.BufferPool
	buf  *[]byte
	n    int
	err  error
}

// ReadOnReady is the optional read method grpc's transport looks for on a
// connection (grpc's internal readyreader.Reader): it takes a buffer from
// pool only once the poller says data has arrived and gives it back once
// it has used what came, rather than keeping a 32 KiB bufio.Reader for the
// connection's life. grpc does that by itself on Linux for a bare
// *net.UnixConn, which the admitted connection's wrapper hides: every connection got a
// buffer of its own, and an idle one kept it.
func (c *readingConn) ReadOnReady(bufSize int, pool mem.BufferPool) (*[]byte, int, error) {
	r := &c.readyRead
	if !r.started {
		r.started = true
		r.start(c.Conn)
	}
	if r.raw == nil {
		// Only the bytes of a socket itself are read past the wrapper
		// (another kind of connection could hand out something else);
		// here the buffer is held while the read waits.
		buf := pool.Get(bufSize)
		n, err := c.Conn.Read(*buf)
		if n > 0 {
			return buf, n, nil
		}
		pool.Put(buf)
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, 0, err
	}
	r.size, r.pool = bufSize, pool
	err := r.raw.Read(r.doRead)
	buf, n, rerr := r.buf, r.n, r.err
	r.pool, r.buf, r.n, r.err = nil, nil, 0, nil
	switch {
	case err != nil:
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	case rerr != nil:
		return nil, 0, rerr
	case n == 0:
		pool.Put(buf)
		return nil, 0, io.EOF
	}
	return buf, n, nil
}

func (r *readyRead) start(c net.Conn) {
	if sc, ok := c.(*scopedConn); ok {
		// A session socket's connection: the socket's own bytes too.
		c = sc.Conn
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return
	}
	r.raw = raw
	r.doRead = func(fd uintptr) bool {
		r.buf = r.pool.Get(r.size)
		for {
			// syscall, as net.Conn's own reads use, not x/sys/unix: the
			// race detector would take the two for racing writers.
			r.n, r.err = syscall.Read(int(fd), *r.buf)
			if !errors.Is(r.err, syscall.EINTR) {
				break
			}
		}
		if r.err != nil {
			r.pool.Put(r.buf)
			r.buf = nil
		}
		return !errors.Is(r.err, syscall.EAGAIN)
	}
}
