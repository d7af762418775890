package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fdDir lists the fds of the process that reads it (fdesc); its entries are
// devices, not links, so describeFd asks the fd itself.
const fdDir = "/dev/fd"

// describeFd is the kind of file fd is and whether it is the kqueue of the
// probe's Go runtime's netpoller. A kqueue is never inherited across fork,
// so any kqueue here is the probe's own; kevent with nothing to change or
// collect tells one from every other kind of file without touching it.
func describeFd(fd int) (what string, own bool) {
	if _, err := unix.Kevent(fd, nil, nil, &unix.Timespec{}); err == nil {
		return "kqueue", true
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "fstat: " + err.Error(), false
	}
	kinds := map[uint16]string{
		unix.S_IFREG: "file", unix.S_IFDIR: "directory", unix.S_IFCHR: "character device",
		unix.S_IFBLK: "block device", unix.S_IFIFO: "pipe", unix.S_IFSOCK: "socket", unix.S_IFLNK: "symlink",
	}
	kind, ok := kinds[st.Mode&unix.S_IFMT]
	if !ok {
		kind = fmt.Sprintf("mode %#o", st.Mode)
	}
	return fmt.Sprintf("%s (dev %d, inode %d)", kind, st.Dev, st.Ino), false
}
