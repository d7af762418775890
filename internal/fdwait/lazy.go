package fdwait

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Lazy is a descriptor whose *os.File is made only when something first
// reads, writes or sets a deadline on it, and with the file its entry in
// the runtime's poller: a descriptor there costs the runtime a poll
// descriptor of 512 bytes, which it keeps for reuse and never frees, and
// the kernel an epoll entry, for as long as it is open. An idle session's
// pipes are never read or written, so they wait in the waiter (Add takes
// a Lazy) and never enter the poller. Until the file exists the
// descriptor is used under a lock that Close takes too, so that, as with
// a file, a closed descriptor's number, which may name another file by
// then, is never used.
type Lazy struct {
	mu   sync.Mutex
	fd   int // -1 once closed
	name string
	f    *os.File
	// rc is f's, kept: the seccomp listener's every notification goes
	// through Control and Read, and f.SyscallConn allocates each time.
	rc syscall.RawConn
}

// Opened makes f, a file made already, a Lazy: for code that handles
// lazy and made files alike.
func Opened(f *os.File) *Lazy {
	l := &Lazy{fd: -1, name: f.Name()}
	l.setFile(f)
	return l
}

// setFile makes f the Lazy's file.
func (l *Lazy) setFile(f *os.File) {
	l.f = f
	// An *os.File's SyscallConn fails only on a nil file.
	l.rc, _ = f.SyscallConn()
}

// File returns the file, made the first time; os.ErrClosed once closed.
func (l *Lazy) File() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		if l.fd < 0 {
			return nil, fmt.Errorf("%s: %w", l.name, os.ErrClosed)
		}
		l.setFile(os.NewFile(uintptr(l.fd), l.name))
	}
	return l.f, nil
}

// made returns the file if it has been made; otherwise it returns nil with
// l.mu held, which the caller releases.
func (l *Lazy) made() *os.File {
	l.mu.Lock()
	if f := l.f; f != nil {
		l.mu.Unlock()
		return f
	}
	return nil
}

// Name is the file's name.
func (l *Lazy) Name() string { return l.name }

// SetReadDeadline is the file's: a reader that waits with a deadline
// waits in the runtime's poller.
func (l *Lazy) SetReadDeadline(t time.Time) error {
	f, err := l.File()
	if err != nil {
		return err
	}
	return f.SetReadDeadline(t)
}

// Close closes the descriptor, through its file if it has one.
func (l *Lazy) Close() error {
	if f := l.made(); f != nil {
		return f.Close()
	}
	defer l.mu.Unlock()
	if l.fd < 0 {
		return fmt.Errorf("close %s: %w", l.name, os.ErrClosed)
	}
	fd := l.fd
	l.fd = -1
	if err := closeFd(fd); err != nil {
		return fmt.Errorf("close %s: %w", l.name, err)
	}
	return nil
}

// SyscallConn gives the descriptor to calls that neither read nor write
// it (ioctl, fcntl, epoll_ctl) without making its file; reads and writes
// through it make the file.
func (l *Lazy) SyscallConn() (syscall.RawConn, error) { return lazyConn{l}, nil }

type lazyConn struct{ l *Lazy }

func (c lazyConn) Control(fn func(fd uintptr)) error {
	l := c.l
	if f := l.made(); f != nil {
		return l.rc.Control(fn)
	}
	defer l.mu.Unlock()
	if l.fd < 0 {
		return fmt.Errorf("%s: %w", l.name, os.ErrClosed)
	}
	fn(uintptr(l.fd))
	return nil
}

func (c lazyConn) Read(fn func(fd uintptr) bool) error {
	rc, err := c.fileConn()
	if err != nil {
		return err
	}
	return rc.Read(fn)
}

func (c lazyConn) Write(fn func(fd uintptr) bool) error {
	rc, err := c.fileConn()
	if err != nil {
		return err
	}
	return rc.Write(fn)
}

func (c lazyConn) fileConn() (syscall.RawConn, error) {
	if _, err := c.l.File(); err != nil {
		return nil, err
	}
	return c.l.rc, nil
}
