//go:build unix

package pty

import (
	"fmt"
	"os"

	creack "github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Open allocates a pseudo-terminal. The replica is what the sandboxed
// process gets as its stdio; the master stays with the daemon. On Linux the
// master is non-blocking so Close interrupts a pending Read and read deadlines
// work; calling its Fd method would undo that, which is why Resize does not.
func Open() (master, replica *os.File, err error) {
	m, r, err := creack.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	m, err = pollable(m)
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	return m, r, nil
}

// Resize sets the window size of the terminal; the kernel sends SIGWINCH to
// its foreground process group.
func Resize(master *os.File, rows, cols uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize pty to %dx%d: %w", rows, cols, err)
	}
	var ioctlErr error
	err = rc.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err == nil {
		err = ioctlErr
	}
	if err != nil {
		return fmt.Errorf("resize pty to %dx%d: %w", rows, cols, err)
	}
	return nil
}

// Adopt wraps a master fd received from elsewhere (a backend that allocated
// the terminal inside a sandbox) the way Open wraps its own.
func Adopt(fd int) (*os.File, error) {
	m, err := pollable(os.NewFile(uintptr(fd), "ptmx"))
	if err != nil {
		return nil, fmt.Errorf("adopt pty master: %w", err)
	}
	return m, nil
}
