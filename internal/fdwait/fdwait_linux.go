package fdwait

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUnsupported: this OS has no waiter. Linux has one; the error exists
// so that callers can be written once for every OS.
var ErrUnsupported = errors.New("fdwait: not supported on this OS")

// errCancelled is Rearm's answer once the registration has been cancelled.
var errCancelled = errors.New("fdwait: registration cancelled")

// Wait is one descriptor's registration.
type Wait struct {
	fd    int
	token uint64
	fn    func()
	// once registrations are removed as they fire.
	once bool
}

// waiter is the process's one epoll instance and what is registered in it.
type waiter struct {
	epfd int
	rc   syscall.RawConn

	mu   sync.Mutex
	next uint64
	regs map[uint64]*Wait
}

var theWaiter = sync.OnceValues(func() (*waiter, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll: set non-blocking: %w", err)
	}
	// An epoll instance is itself readable while it has events ready:
	// the runtime's poller waits on it like on a socket. Never closed.
	rc, err := os.NewFile(uintptr(epfd), "fdwait").SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	w := &waiter{epfd: epfd, rc: rc, regs: map[uint64]*Wait{}}
	go w.dispatch()
	return w, nil
})

// Add registers fd: once it is readable (or hung up, or in error), fn is
// started on a goroutine of its own, and the registration is disarmed
// until Rearm. fd must stay open until Cancel has returned.
func Add(fd int, fn func()) (*Wait, error) { return add(fd, fn, false) }

// AddOnce registers fd to start fn the first time it is readable, after
// which the registration is gone. fd must stay open until fn has started
// or Cancel has returned.
func AddOnce(fd int, fn func()) (*Wait, error) { return add(fd, fn, true) }

func add(fd int, fn func(), once bool) (*Wait, error) {
	w, err := theWaiter()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	r := &Wait{fd: fd, token: w.next, fn: fn, once: once}
	ev := r.event()
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return nil, fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	w.regs[r.token] = r
	return r, nil
}

// event is what the kernel hands back when r is ready: its token, not a
// pointer, which the kernel's copy would hide from the garbage collector.
// One-shot, so that a readable descriptor starts fn once and then waits
// for its owner, whose goroutine reads it.
func (r *Wait) event() unix.EpollEvent {
	return unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLONESHOT,
		Fd:     int32(uint32(r.token)),
		Pad:    int32(uint32(r.token >> 32)),
	}
}

// Rearm starts fn again the next time fd is readable, which may be at
// once: the kernel checks the descriptor as it rearms it.
func (r *Wait) Rearm() error {
	w, _ := theWaiter()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.regs[r.token] != r {
		return errCancelled
	}
	ev := r.event()
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, r.fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl rearm fd %d: %w", r.fd, err)
	}
	return nil
}

// Cancel removes the registration: fn is not started for it again, though
// one started before may still be running. Calling it again does nothing.
func (r *Wait) Cancel() {
	w, _ := theWaiter()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.regs[r.token] != r {
		return
	}
	delete(w.regs, r.token)
	unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, r.fd, nil)
}

// dispatch starts the function of each registration that is ready. It
// runs for the life of the process, parked in the runtime's poller while
// nothing is.
func (w *waiter) dispatch() {
	events := make([]unix.EpollEvent, 128)
	for {
		var n int
		err := w.rc.Read(func(fd uintptr) bool {
			for {
				var err error
				n, err = unix.EpollWait(int(fd), events, 0)
				if err == nil {
					return n > 0
				}
				if !errors.Is(err, unix.EINTR) {
					// Cannot happen with a valid epoll fd and buffer;
					// nothing could be dispatched again.
					panic(fmt.Sprintf("fdwait: epoll_wait: %v", err))
				}
			}
		})
		if err != nil {
			panic(fmt.Sprintf("fdwait: wait for epoll: %v", err))
		}
		for _, ev := range events[:n] {
			token := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			r := w.regs[token]
			if r != nil && r.once {
				delete(w.regs, token)
				unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, r.fd, nil)
			}
			w.mu.Unlock()
			if r != nil {
				go r.fn()
			}
		}
	}
}
