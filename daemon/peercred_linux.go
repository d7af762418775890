package daemon

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCaller reads SO_PEERCRED: the credentials the peer had when it
// connected, recorded by the kernel, which a client cannot forge.
func peerCaller(conn net.Conn) (Caller, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return Caller{}, fmt.Errorf("%T is not a unix socket connection", conn)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("getsockopt SO_PEERCRED: %w", credErr)
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
