package transport

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>, the only struct xucred
// layout unix.Xucred describes.
const xucredVersion = 0

// socketPeer reads LOCAL_PEERCRED and LOCAL_PEERPID of the connected socket
// fd. The struct xucred recorded at connect time holds the effective uid
// and, in cr_groups[0], the effective gid; the rest of cr_groups are the
// supplementary groups, at most XU_NGROUPS (16) in all. A peer in more
// groups than that loses the rest, which only ever withholds operator
// rights, never grants them.
func socketPeer(fd int) (Caller, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Caller{}, fmt.Errorf("getsockopt LOCAL_PEERCRED: %w", err)
	}
	if x.Version != xucredVersion {
		return Caller{}, fmt.Errorf("getsockopt LOCAL_PEERCRED: struct xucred version %d, want %d", x.Version, xucredVersion)
	}
	n := min(int(x.Ngroups), len(x.Groups))
	if n < 1 {
		return Caller{}, fmt.Errorf("getsockopt LOCAL_PEERCRED: no effective gid (%d groups)", x.Ngroups)
	}
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return Caller{}, fmt.Errorf("getsockopt LOCAL_PEERPID: %w", err)
	}
	return Caller{UID: x.Uid, GID: x.Groups[0], PID: int32(pid), Groups: append([]uint32(nil), x.Groups[1:n]...)}, nil
}
