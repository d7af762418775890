package launcherlinux

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A sandbox in a private network namespace that has a session socket
// cannot be allowed to connect unix sockets itself: its view of the host's
// filesystem holds every host daemon's socket. Its seccomp filter hands each
// connect() to the daemon instead (SECCOMP_RET_USER_NOTIF), and the daemon
// performs it on a duplicate of the sandbox's socket with its own copy of
// the address, never letting the kernel continue the original call, whose
// address the sandbox could change once checked.

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

// seccompData is struct seccomp_data.
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

const (
	// sockaddrStorageSize bounds the address connect() accepts, as the
	// kernel's move_addr_to_kernel does.
	sockaddrStorageSize = 128
	// maxConnectsInFlight bounds the connects performed at once for one
	// sandbox: a blocking connect holds one of the daemon's threads until
	// it completes, and a sandbox must not exhaust them.
	maxConnectsInFlight = 64
	// errUnixRefused is what a connect to any unix address but the session
	// socket gets: the kernel's answer for a path where nothing listens,
	// so the sandbox learns nothing about which host sockets exist.
	errUnixRefused = unix.ECONNREFUSED
)

// errSandboxGone ends the receive loop: no task uses the filter any more.
var errSandboxGone = errors.New("no process left under the seccomp filter")

// connectSupervisor answers the connect() notifications of one sandbox.
type connectSupervisor struct {
	listener *os.File
	// hostSocket is where SessionSocketPath leads.
	hostSocket string
	slots      chan struct{}
	done       chan struct{}
	wg         sync.WaitGroup

	mu       sync.Mutex
	stopped  bool
	inFlight map[int]bool
}

// superviseConnects takes over listener, the seccomp listener the init
// sent, and answers its notifications until stop.
func superviseConnects(listener int, hostSocket string) (*connectSupervisor, error) {
	// Non-blocking so that the runtime's poller waits for notifications and
	// closing the file ends the wait; the ioctls ignore the flag.
	if err := unix.SetNonblock(listener, true); err != nil {
		unix.Close(listener)
		return nil, fmt.Errorf("seccomp listener: %w", err)
	}
	s := &connectSupervisor{
		listener:   os.NewFile(uintptr(listener), "seccomp-listener"),
		hostSocket: hostSocket,
		slots:      make(chan struct{}, maxConnectsInFlight),
		done:       make(chan struct{}),
		inFlight:   map[int]bool{},
	}
	rc, err := s.listener.SyscallConn()
	if err != nil {
		s.listener.Close()
		return nil, fmt.Errorf("seccomp listener: %w", err)
	}
	s.wg.Add(1)
	go s.receive(rc)
	return s, nil
}

// stop ends the supervision once the sandbox is gone: it aborts connects
// still in progress (an inet connect waiting for an answer that cannot come
// now) and waits for every answer to finish. A connect to the session
// socket waits until the daemon accepts it or closes that socket.
func (s *connectSupervisor) stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.done)
		for fd := range s.inFlight {
			unix.Shutdown(fd, unix.SHUT_RDWR)
		}
	}
	s.mu.Unlock()
	s.listener.Close()
	s.wg.Wait()
}

func (s *connectSupervisor) receive(rc syscall.RawConn) {
	defer s.wg.Done()
	// Whatever ends the loop, nothing answers afterwards: with the
	// listener closed, a connect still waiting fails (ENOSYS) instead of
	// waiting forever.
	defer s.listener.Close()
	for {
		var n seccompNotif
		var recvErr error
		err := rc.Read(func(fd uintptr) bool {
			// SECCOMP_IOCTL_NOTIF_RECV blocks whatever the file's flags;
			// it is called only once a notification is pending.
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				_, err := unix.Poll(pfd, 0)
				if err == nil {
					break
				}
				if !errors.Is(err, unix.EINTR) {
					recvErr = fmt.Errorf("poll seccomp listener: %w", err)
					return true
				}
			}
			switch {
			case pfd[0].Revents&unix.POLLIN != 0:
				recvErr = ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n))
				return true
			case pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0:
				recvErr = errSandboxGone
				return true
			}
			return false
		})
		switch {
		case err != nil, errors.Is(recvErr, errSandboxGone):
			return
		case errors.Is(recvErr, unix.ENOENT), errors.Is(recvErr, unix.EINTR):
			// The target died (or was interrupted) before its
			// notification could be received.
			continue
		case recvErr != nil:
			return
		}
		select {
		case s.slots <- struct{}{}:
		case <-s.done:
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			s.answer(rc, n)
		}()
	}
}

// answer performs the connect of notification n and sends its result.
func (s *connectSupervisor) answer(rc syscall.RawConn, n seccompNotif) {
	resp := seccompNotifResp{ID: n.ID}
	if errno := s.emulate(rc, n); errno != 0 {
		resp.Error = -int32(errno)
	}
	// Fails when the target has died meanwhile (ENOENT) or the listener
	// is closed: nobody waits for the answer then.
	rc.Control(func(fd uintptr) {
		ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
	})
}

// emulate returns what connect() returns to the target: 0 or an errno.
func (s *connectSupervisor) emulate(rc syscall.RawConn, n seccompNotif) syscall.Errno {
	if n.Data.Arch != auditX8664 || n.Data.Nr != nrConnect {
		return unix.ENOSYS
	}
	// connect(int fd, const struct sockaddr *addr, socklen_t len): the
	// kernel reads fd and len as 32-bit ints.
	targetFd := int(int32(n.Data.Args[0]))
	addrLen := int(int32(n.Data.Args[2]))
	if addrLen < 0 || addrLen > sockaddrStorageSize {
		return unix.EINVAL
	}
	pidfd, err := targetPidfd(int(n.Pid))
	if err != nil {
		return errnoOrEPERM(err)
	}
	defer unix.Close(pidfd)
	addr := make([]byte, addrLen)
	var readErr syscall.Errno
	if addrLen > 0 {
		got, err := unix.ProcessVMReadv(int(n.Pid),
			[]unix.Iovec{{Base: &addr[0], Len: uint64(addrLen)}},
			[]unix.RemoteIovec{{Base: uintptr(n.Data.Args[1]), Len: addrLen}}, 0)
		switch {
		case err != nil:
			readErr = errnoOrEPERM(err)
		case got != addrLen:
			readErr = unix.EFAULT
		}
	}
	// Still pending means the target was alive throughout: the pid the
	// pidfd and the read went by was not reused by another process.
	if !notificationValid(rc, n.ID) {
		return unix.ESRCH
	}
	if readErr != 0 {
		return readErr
	}
	sock, err := unix.PidfdGetfd(pidfd, targetFd, 0)
	if err != nil {
		return errnoOrEPERM(err)
	}
	defer unix.Close(sock)
	if !s.track(sock) {
		return errUnixRefused
	}
	defer s.untrack(sock)
	// The socket's own family decides, not the address's: the address is
	// the sandbox's to choose.
	family, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return errnoOrEPERM(err)
	}
	switch family {
	case unix.AF_UNIX:
		return s.connectUnix(sock, addr)
	case unix.AF_INET, unix.AF_INET6:
		// They live in the sandbox's network namespace, and connect()
		// acts there whoever calls it.
		return rawConnect(sock, addr)
	case unix.AF_NETLINK:
		return connectNetlink(sock, addr)
	}
	// No other family can be made inside; one handed in from outside
	// gets what its socket() would have got.
	return unix.EPERM
}

// connectUnix connects sock to the session socket when addr names
// SessionSocketPath, and refuses every other address.
func (s *connectSupervisor) connectUnix(sock int, addr []byte) syscall.Errno {
	if len(addr) >= 2 && binary.NativeEndian.Uint16(addr) == unix.AF_UNSPEC {
		// Dissolves a datagram socket's association and reaches nothing.
		return rawConnect(sock, addr)
	}
	// As the kernel checks a unix address (unix_validate_addr).
	if len(addr) <= 2 || len(addr) > unix.SizeofSockaddrUnix || binary.NativeEndian.Uint16(addr) != unix.AF_UNIX {
		return unix.EINVAL
	}
	path := addr[2:]
	if i := bytes.IndexByte(path, 0); i >= 0 {
		path = path[:i]
	}
	// An abstract address (a leading NUL) is left empty here, and a
	// relative path never equals the absolute one.
	if string(path) != SessionSocketPath {
		return errUnixRefused
	}
	return errnoOrEPERM(unix.Connect(sock, &unix.SockaddrUnix{Name: s.hostSocket}))
}

// connectNetlink refuses to name a peer or a multicast group: the kernel
// checks CAP_NET_ADMIN for that against the caller, which here is the
// daemon, not the sandbox that has no capabilities.
func connectNetlink(sock int, addr []byte) syscall.Errno {
	if len(addr) >= unix.SizeofSockaddrNetlink && binary.NativeEndian.Uint16(addr) == unix.AF_NETLINK {
		var nl unix.RawSockaddrNetlink
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&nl)), unix.SizeofSockaddrNetlink), addr)
		if nl.Pid != 0 || nl.Groups != 0 {
			return unix.EPERM
		}
	}
	return rawConnect(sock, addr)
}

// rawConnect passes the address bytes as they came, so the kernel
// validates them exactly as for the sandbox's own call.
func rawConnect(sock int, addr []byte) syscall.Errno {
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(p), uintptr(len(addr)))
	return errno
}

// track registers a duplicate under connect for stop to abort; false once
// stopped.
func (s *connectSupervisor) track(fd int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.inFlight[fd] = true
	return true
}

// untrack runs before the duplicate is closed, so stop never shuts down
// an fd number that was reused meanwhile.
func (s *connectSupervisor) untrack(fd int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, fd)
}

func notificationValid(rc syscall.RawConn, id uint64) bool {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id))
	}); cerr != nil {
		return false
	}
	return err == nil
}

// targetPidfd opens the thread that made the call: its fd table is the one
// the call's fd number refers to.
func targetPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if !errors.Is(err, unix.EINVAL) {
		return fd, err
	}
	// Before Linux 6.9 a pidfd names a whole thread group; its leader
	// shares the fd table of the threads it started.
	tgid, err := threadGroupOf(tid)
	if err != nil {
		return -1, err
	}
	return unix.PidfdOpen(tgid, 0)
}

// threadGroupOf reads the thread group id of thread tid.
func threadGroupOf(tid int) (int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Tgid", tid)
}

func ioctlPtr(fd uintptr, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// errnoOrEPERM is err's errno, EPERM for an error that carries none.
func errnoOrEPERM(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return unix.EPERM
}
