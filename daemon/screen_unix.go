//go:build unix

package daemon

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// writeNoWait writes p to f in one non-blocking write: what does not fit
// now is dropped.
func writeNoWait(f syscall.Conn, p []byte) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var werr error
	if err := raw.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), p)
		return true
	}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	return nil
}
