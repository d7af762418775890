package daemon

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerCaller reads SO_PEERCRED and SO_PEERGROUPS: the credentials the peer
// had when it connected, recorded by the kernel, which a client cannot
// forge. A connection accepted on a session's socket also carries that
// session.
func peerCaller(conn net.Conn) (Caller, error) {
	var scope string
	if sc, ok := conn.(*scopedConn); ok {
		scope, conn = sc.session, sc.Conn
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return Caller{}, fmt.Errorf("%T is not a unix socket connection", conn)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var (
		cred    *unix.Ucred
		groups  []uint32
		credErr error
	)
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			groups, credErr = peerGroups(int(fd))
		}
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, credErr
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Groups: groups, Session: scope}, nil
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13): the peer's supplementary
// groups at connect time, so membership of the operators group is the
// kernel's word too.
func peerGroups(fd int) ([]uint32, error) {
	n := 64
	for {
		buf := make([]uint32, n)
		size := uint32(n * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == 0:
			return buf[:size/4], nil
		case errors.Is(errno, unix.ERANGE) && int(size/4) > n:
			n = int(size / 4)
		default:
			return nil, fmt.Errorf("getsockopt SO_PEERGROUPS: %w", errno)
		}
	}
}
