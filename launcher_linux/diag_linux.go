package launcherlinux

import (
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
// CAP_SYS_ADMIN (a rootless one) may not: the first session tells which,
// and every later one does the same.
type diagMode struct{ state atomic.Int32 }

const (
	diagUntried int32 = iota
	diagAtNeed
	diagKept
)

// atNeed says whether the session of init h makes its socket when first
// needed, trying once, for the first session, whether it can.
func (m *diagMode) atNeed(h *initHandle) bool {
	if s := m.state.Load(); s != diagUntried {
		return s == diagAtNeed
	}
	next := diagKept
	if fd, err := h.diagSocket(); err == nil {
		unix.Close(fd)
		next = diagAtNeed
	}
	m.state.CompareAndSwap(diagUntried, next)
	return m.state.Load() == diagAtNeed
}

// diagSocket makes a NETLINK_SOCK_DIAG socket in the init's network
// namespace, the sandbox's, entered through its pidfd: a pid could by now
// name another process, in another namespace, whose listeners would pass
// for the sandbox's own. It fails once the init has ended.
func (h *initHandle) diagSocket() (fd int, err error) {
	fd = -1
	if cerr := h.rc.Control(func(pidfd uintptr) { fd, err = socketInNetNS(int(pidfd)) }); cerr != nil {
		return -1, cerr
	}
	return fd, err
}

// socketInNetNS makes the socket on a thread of its own moved into the
// network namespace of the process pidfd names; that thread ends with
// its goroutine rather than serve the runtime in another namespace.
func socketInNetNS(pidfd int) (int, error) {
	type made struct {
		fd  int
		err error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(pidfd, unix.CLONE_NEWNET); err != nil {
			// The thread is where it was.
			runtime.UnlockOSThread()
			done <- made{-1, fmt.Errorf("enter the sandbox's network namespace: %w", err)}
			return
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			err = fmt.Errorf("sock_diag socket: %w", err)
		}
		done <- made{fd, err}
	}()
	m := <-done
	return m.fd, m.err
}
