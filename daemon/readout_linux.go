package daemon

import (
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// readBuffers lend a read its buffer only while there is something to
// read: an idle session waiting for output holds none, so a thousand of
// them do not keep readChunk bytes each.
var readBuffers = sync.Pool{New: func() any { return new([readChunk]byte) }}

// outputReader returns how a session's output is read from f: each call
// waits for output and returns a copy of what was read, which the caller
// owns. A terminal master hands out at most one line-discipline buffer
// (about 4 KiB) per read, so a program writing fast would cost a read, a
// wake-up and a gRPC message per 4 KiB; this takes everything already
// there, up to readChunk, in one wake-up. It never waits for more than
// the first byte: a keystroke's echo goes out as soon as it is read.
func outputReader(f *os.File) func() ([]byte, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return plainOutputReader(f)
	}
	return func() ([]byte, error) {
		var out []byte
		var readErr error
		err := rc.Read(func(fd uintptr) bool {
			buf := readBuffers.Get().(*[readChunk]byte)
			defer readBuffers.Put(buf)
			n := 0
			done := func() bool {
				out = append([]byte(nil), buf[:n]...)
				return true
			}
			for n < len(buf) {
				m, err := unix.Read(int(fd), buf[n:])
				switch {
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN:
					// Nothing yet: let the poller wait. Something: send it.
					return n > 0 && done()
				case err != nil:
					readErr = &os.PathError{Op: "read", Path: f.Name(), Err: err}
					return done()
				case m == 0:
					readErr = io.EOF
					return done()
				}
				n += m
			}
			return done()
		})
		if err != nil {
			return nil, err
		}
		if len(out) == 0 {
			out = nil
		}
		return out, readErr
	}
}
