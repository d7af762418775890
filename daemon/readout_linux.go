package daemon

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// outputReader returns how a session's output is read from f. A terminal
// master hands out at most one line-discipline buffer (about 4 KiB) per
// read, so a program writing fast would cost a read, a wake-up and a gRPC
// message per 4 KiB; this takes everything already there, up to len(buf),
// in one wake-up. It never waits for more than the first byte: a keystroke's
// echo goes out as soon as it is read.
func outputReader(f *os.File) func(buf []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Read
	}
	return func(buf []byte) (int, error) {
		var n int
		var readErr error
		err := rc.Read(func(fd uintptr) bool {
			for n < len(buf) {
				m, err := unix.Read(int(fd), buf[n:])
				switch {
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN:
					// Nothing yet: let the poller wait. Something: send it.
					return n > 0
				case err != nil:
					readErr = &os.PathError{Op: "read", Path: f.Name(), Err: err}
					return true
				case m == 0:
					readErr = io.EOF
					return true
				}
				n += m
			}
			return true
		})
		if err != nil {
			return n, err
		}
		return n, readErr
	}
}
