package transport

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socketPeer reads SO_PEERCRED and SO_PEERGROUPS of the connected socket
// fd.
func socketPeer(fd int) (Caller, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Caller{}, fmt.Errorf("getsockopt SO_PEERCRED: %w", err)
	}
	groups, err := peerGroups(fd)
	if err != nil {
		return Caller{}, err
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Groups: groups}, nil
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13): the peer's supplementary
// groups at connect time, so membership of the operators group is the
// kernel's word too. What it returns is a copy of the groups alone: a
// session keeps its caller's for as long as it lasts, and the buffer the
// kernel filled is a quarter of a KiB however few the groups are.
func peerGroups(fd int) ([]uint32, error) {
	n := 64
	for {
		buf := make([]uint32, n)
		size := uint32(n * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == 0:
			return append([]uint32(nil), buf[:size/4]...), nil
		case errors.Is(errno, unix.ERANGE) && int(size/4) > n:
			n = int(size / 4)
		default:
			return nil, fmt.Errorf("getsockopt SO_PEERGROUPS: %w", errno)
		}
	}
}
