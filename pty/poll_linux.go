package pty

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pollable returns a non-blocking copy of the master and closes m. creack/pty
// leaves the master in blocking mode, where Close does not interrupt a
// pending Read and deadlines do not work; the daemon needs both to stop
// draining a terminal whose replica was leaked to a process it cannot see.
func pollable(m *os.File) (*os.File, error) {
	defer m.Close()
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), m.Name()), nil
}
