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

// Wait is one descriptor's registration. An idle session holds one for
// each of its outputs, its seccomp listener and its report pipe's end for
// its life, so what
// only an epoll_ctl needs is the waiter's (under its mu), not kept here.
type Wait struct {
	// rc is the registered file's: the descriptor is named to the kernel
	// only through it, so that once the file is closed its number, which
	// may name another file by then, is never used.
	rc    syscall.RawConn
	w     *waiter
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

	// ctl applies op with ev to the descriptor it is given and sets
	// err; made once, so that adding, rearming and removing a
	// registration allocate no closure. Used under mu.
	ctl func(fd uintptr)
	op  int
	ev  unix.EpollEvent
	err error
}

var (
	waiterMu sync.Mutex
	// theWaiter is made by the first registration, or by Ready; a
	// failure to make it is returned, not kept, so that a process that
	// was out of descriptors for a moment tries again with the next.
	theWaiter *waiter
)

// Ready makes the process's waiter if it has none yet, and says why it
// cannot. A caller that relies on the waiter calls it where it can still
// refuse the work it would wait for.
func Ready() error {
	_, err := get()
	return err
}

func get() (*waiter, error) {
	waiterMu.Lock()
	defer waiterMu.Unlock()
	if theWaiter != nil {
		return theWaiter, nil
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fdwait: epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("fdwait: epoll: set non-blocking: %w", err)
	}
	// An epoll instance is itself readable while it has events ready:
	// the runtime's poller waits on it like on a socket. Never closed.
	rc, err := os.NewFile(uintptr(epfd), "fdwait").SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("fdwait: epoll: %w", err)
	}
	w := &waiter{epfd: epfd, rc: rc, regs: map[uint64]*Wait{}}
	w.ctl = func(fd uintptr) {
		if w.err = unix.EpollCtl(w.epfd, w.op, int(fd), &w.ev); w.err != nil {
			w.err = fmt.Errorf("fdwait: epoll_ctl %s fd %d: %w", ctlNames[w.op], fd, w.err)
		}
	}
	theWaiter = w
	go theWaiter.dispatch()
	return theWaiter, nil
}

// Add registers f: once it is readable (or hung up, or in error), fn is
// started on a goroutine of its own, and the registration is disarmed
// until Rearm. Closing f before Cancel is safe: Cancel then only forgets
// fn. The kernel drops a file from the set once all its descriptors are
// closed; until then (a dup, a child's copy) its entry stays, but being
// one-shot it fires at most once more, and its token, never reused, finds
// no registration, so nothing is started.
func Add(f syscall.Conn, fn func()) (*Wait, error) { return add(f, fn, false) }

// AddOnce registers f to start fn the first time it is readable, after
// which the registration is gone.
func AddOnce(f syscall.Conn, fn func()) (*Wait, error) { return add(f, fn, true) }

func add(f syscall.Conn, fn func(), once bool) (*Wait, error) {
	w, err := get()
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("fdwait: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	r := &Wait{rc: rc, w: w, token: w.next, fn: fn, once: once}
	if err := r.control(unix.EPOLL_CTL_ADD); err != nil {
		return nil, err
	}
	w.regs[r.token] = r
	return r, nil
}

var ctlNames = map[int]string{unix.EPOLL_CTL_ADD: "add", unix.EPOLL_CTL_MOD: "rearm", unix.EPOLL_CTL_DEL: "remove"}

// control applies op to r's descriptor, while its file is open; w.mu is
// held.
func (r *Wait) control(op int) error {
	w := r.w
	w.op, w.ev, w.err = op, r.event(), nil
	if err := r.rc.Control(w.ctl); err != nil {
		return fmt.Errorf("fdwait: %w", err)
	}
	return w.err
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

// Rearm starts fn again the next time the file is readable, which may be
// at once: the kernel checks the descriptor as it rearms it.
func (r *Wait) Rearm() error {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.regs[r.token] != r {
		return errCancelled
	}
	return r.control(unix.EPOLL_CTL_MOD)
}

// Cancel removes the registration: fn is not started for it again, though
// one started before may still be running. Calling it again does nothing.
func (r *Wait) Cancel() {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.regs[r.token] != r {
		return
	}
	delete(w.regs, r.token)
	// After Close this fails and does nothing: the file's entry leaves
	// the set with its last descriptor, and is harmless till then (Add).
	r.control(unix.EPOLL_CTL_DEL)
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
				r.control(unix.EPOLL_CTL_DEL)
			}
			w.mu.Unlock()
			if r != nil {
				go r.fn()
			}
		}
	}
}

// NewLazy takes fd, a non-blocking descriptor, which it closes, as a Lazy
// named name.
func NewLazy(fd int, name string) *Lazy { return &Lazy{fd: fd, name: name} }

func closeFd(fd int) error { return unix.Close(fd) }
