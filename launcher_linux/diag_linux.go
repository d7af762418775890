package launcherlinux

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// diagMode says whether the daemon makes a sandbox's NETLINK_SOCK_DIAG
// socket (see supervisor.whoseListener) when the sandbox first connects
// to a unix socket by path, or keeps the one its init sends from the
// launch. The socket is about 3 KiB of unreclaimable kernel memory
// (its netlink_sock in kmalloc-2k, its inode, its file) for as long as the
// session lasts, and an idle session never needs it. Making it takes
// entering the sandbox's network namespace, which a daemon without
// CAP_SYS_ADMIN (a rootless one) may not: the first session that can tell
// (the kernel refusing with EPERM, or the socket made) decides for every
// later one. Any other failure (the init gone, out of descriptors) tells
// nothing: that session keeps its init's, and the next one tries again.
type diagMode struct {
	state atomic.Int32
	// logf logs a thread that entered a sandbox's namespace and could
	// not come back; nil logs nothing.
	logf func(format string, args ...any)
}

const (
	diagUntried int32 = iota
	diagAtNeed
	diagKept
)

// atNeed says whether the session of init h makes its socket when first
// needed, trying whether it can until that is known.
func (m *diagMode) atNeed(h *initHandle) bool { return m.decide(m.opener(h)) }

// opener makes the sock_diag socket of the session of init h.
func (m *diagMode) opener(h *initHandle) func() (int, error) {
	return func() (int, error) { return h.diagSocket(m.logf) }
}

// decide is atNeed with try making the socket.
func (m *diagMode) decide(try func() (int, error)) bool {
	if s := m.state.Load(); s != diagUntried {
		return s == diagAtNeed
	}
	fd, err := try()
	switch {
	case err == nil:
		unix.Close(fd)
		m.state.CompareAndSwap(diagUntried, diagAtNeed)
	case errors.Is(err, unix.EPERM):
		m.state.CompareAndSwap(diagUntried, diagKept)
	default:
		return false
	}
	return m.state.Load() == diagAtNeed
}

// diagSocket makes a NETLINK_SOCK_DIAG socket in the init's network
// namespace, the sandbox's, entered through its pidfd: a pid could by now
// name another process, in another namespace, whose listeners would pass
// for the sandbox's own. It fails once the init has ended.
func (h *initHandle) diagSocket(logf func(format string, args ...any)) (fd int, err error) {
	fd = -1
	if cerr := h.rc.Control(func(pidfd uintptr) { fd, err = socketInNetNS(int(pidfd), logf) }); cerr != nil {
		return -1, cerr
	}
	return fd, err
}

// socketInNetNS makes the socket on a thread moved into the network
// namespace of the process pidfd names, and moved back before the runtime
// may use it for anything else.
func socketInNetNS(pidfd int, logf func(format string, args ...any)) (int, error) {
	fd := -1
	err := inNetNS(pidfd, logf, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG); err != nil {
			return fmt.Errorf("sock_diag socket: %w", err)
		}
		return nil
	})
	return fd, err
}

// inNetNS runs fn on a thread of its own in the network namespace of the
// process pidfd names, never the process's first thread: the runtime
// cannot end that one and parks it for good instead, and parked in the
// sandbox's namespace it would keep that namespace for the daemon's life,
// and /proc/self/net would show it. The thread goes back to the daemon's
// namespace after; one that cannot is logged through logf (nil logs
// nothing) and left locked, so that no other goroutine runs in the
// sandbox's namespace, to end with its goroutine.
func inNetNS(pidfd int, logf func(format string, args ...any), fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Held by this goroutine, the first thread cannot run the
			// one inNetNS starts again.
			err := inNetNS(pidfd, logf, fn)
			runtime.UnlockOSThread()
			done <- err
			return
		}
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("the daemon's network namespace: %w", err)
			return
		}
		defer unix.Close(home)
		if err := unix.Setns(pidfd, unix.CLONE_NEWNET); err != nil {
			// The thread is where it was.
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter the sandbox's network namespace: %w", err)
			return
		}
		err = fn()
		if serr := unix.Setns(home, unix.CLONE_NEWNET); serr != nil {
			// A thread the daemon loses: should it happen again and
			// again, an operator should know why.
			if logf != nil {
				logf("sock_diag: thread %d cannot go back to the daemon's network namespace from a sandbox's (%v): it is left to end with its goroutine", unix.Gettid(), serr)
			}
		} else {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
