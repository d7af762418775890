package launcherlinux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/unix"
)

// A sandbox in a private network namespace cannot be allowed to connect
// unix sockets itself: its view of the host's filesystem holds every host
// daemon's socket. Its seccomp filter hands each connect() to the daemon
// instead, and the daemon performs it on a duplicate of the sandbox's
// socket with its own copy of the address, never letting the kernel
// continue the original call, whose address the sandbox could change once
// checked. Performing it also tells the daemon what the namespace refused,
// which a filter could not see.

const (
	// sockaddrStorageSize bounds the address connect() accepts, as the
	// kernel's move_addr_to_kernel does.
	sockaddrStorageSize = 128
	// errUnixRefused is what a connect to any unix address but the session
	// socket gets: the kernel's answer for a path where nothing listens,
	// so the sandbox learns nothing about which host sockets exist.
	errUnixRefused = unix.ECONNREFUSED
)

// emulateConnect performs the connect of notification n and returns what
// connect() returns to the target, 0 or an errno, and the record of the
// refusal it was, if it was one.
func (s *supervisor) emulateConnect(n seccompNotif) (syscall.Errno, *sandboxdv1.Denial) {
	// connect(int fd, const struct sockaddr *addr, socklen_t len): the
	// kernel reads fd and len as 32-bit ints.
	targetFd := int(int32(n.Data.Args[0]))
	addrLen := int(int32(n.Data.Args[2]))
	if addrLen < 0 || addrLen > sockaddrStorageSize {
		return unix.EINVAL, nil
	}
	pidfd, err := targetPidfd(int(n.Pid))
	if err != nil {
		return errnoOrEPERM(err), nil
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
	if !notificationValid(s.rc, n.ID) {
		return unix.ESRCH, nil
	}
	if readErr != 0 {
		return readErr, nil
	}
	sock, err := unix.PidfdGetfd(pidfd, targetFd, 0)
	if err != nil {
		return errnoOrEPERM(err), nil
	}
	defer unix.Close(sock)
	if !s.track(sock) {
		return errUnixRefused, nil
	}
	defer s.untrack(sock)
	// The socket's own family decides, not the address's: the address is
	// the sandbox's to choose.
	family, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return errnoOrEPERM(err), nil
	}
	switch family {
	case unix.AF_UNIX:
		errno, refused := s.connectUnix(sock, addr, int(n.Pid))
		if refused {
			return errno, connectDenial(unixTarget(addr), errno)
		}
		return errno, nil
	case unix.AF_INET, unix.AF_INET6:
		// They live in the sandbox's network namespace, and connect()
		// acts there whoever calls it. Sharing the host's, the sandbox
		// has network host (under none it can make no inet socket), and
		// nothing it reaches is a refusal of the policy.
		errno := rawConnect(sock, addr)
		if s.sharedNetNS {
			return errno, nil
		}
		return errno, inetDenial(sock, addr, errno)
	case unix.AF_NETLINK:
		return connectNetlink(sock, addr), nil
	}
	// No other family can be made inside; one handed in from outside
	// gets what its socket() would have got.
	return unix.EPERM, nil
}

// connectUnix connects sock to the session socket when addr names
// SessionSocketPath, fails as the kernel would where nothing is at the
// path (ENOENT) and refuses every other address; refused says the refusal
// is the policy's. tid is the thread that called connect.
func (s *supervisor) connectUnix(sock int, addr []byte, tid int) (errno syscall.Errno, refused bool) {
	if len(addr) >= 2 && binary.NativeEndian.Uint16(addr) == unix.AF_UNSPEC {
		// Dissolves a datagram socket's association and reaches nothing.
		return rawConnect(sock, addr), false
	}
	// As the kernel checks a unix address (unix_validate_addr).
	if len(addr) <= 2 || len(addr) > unix.SizeofSockaddrUnix || binary.NativeEndian.Uint16(addr) != unix.AF_UNIX {
		return unix.EINVAL, false
	}
	// An abstract address (a leading NUL) never equals the path, nor does
	// a relative one.
	p := unixPath(addr)
	switch {
	case s.hostSocket != "" && p == SessionSocketPath:
		return errnoOrEPERM(unix.Connect(sock, &unix.SockaddrUnix{Name: s.hostSocket})), false
	case addr[2] == 0 && !s.sharedNetNS:
		// An abstract name is looked up in the socket's network
		// namespace, the sandbox's own: its listener is the sandbox's.
		return rawConnect(sock, addr), false
	case addr[2] == 0:
		switch s.abstractListener(addr[2:]) {
		case listenerNone:
			return unix.ECONNREFUSED, false
		case listenerOthers:
			return errUnixRefused, true
		}
		return rawConnect(sock, addr), false
	case p == "":
		return errUnixRefused, true
	}
	v := &sandboxView{root: s.root, tid: tid}
	fd, np, err := v.pinnedName(atFdcwd, p, lookupOpts{top: "/", follow: true})
	switch {
	case err == nil:
		defer unix.Close(fd)
	case s.writes != nil && s.writes.searchMasked(np.Path) != nil, !errors.Is(err, unix.ENOENT):
		// Behind a mask (another session's socket, a deny path) is what
		// the policy hides: refused, and recorded.
		return errUnixRefused, true
	default:
		// Nothing there: what the kernel answers anywhere, unrecorded
		// (glibc tries nscd's socket on every user lookup).
		return unix.ENOENT, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&modeType != modeSock || !s.ownListener(st.Dev, st.Ino) {
		return errUnixRefused, true
	}
	// Connected through the fd that was judged: the name may have been
	// swapped since.
	return errnoOrEPERM(unix.Connect(sock, &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(fd)})), false
}

// Netlink sock_diag for unix sockets (linux/unix_diag.h).
const (
	udiagShowName = 0x1
	udiagShowVFS  = 0x2
	unixDiagName  = 0
	unixDiagVFS   = 1
	tcpListen     = 10
	nlmsgHdrSize  = 16
	unixDiagReqSz = 24
	unixDiagMsgSz = 16
)

// ownListener says whether a socket listening in the sandbox's network
// namespace, held by a process of the session, is bound to the inode dev,
// ino: a unix socket belongs to the namespace of the process that made
// it, so such a listener is the sandbox's own, and a host daemon's
// socket, wherever its file lies, is not. In the host's namespace
// (sharedNetNS) holding it is what tells the session's from the host's.
func (s *supervisor) ownListener(dev, ino uint64) bool {
	// sock_diag names the bound file by the kernel's own dev_t
	// (major<<20 | minor) and the inode number cut to 32 bits: on a
	// filesystem with wider ones another file can match, so a listener
	// found is then asked for its file itself.
	found := s.listeners(udiagShowVFS, func(msg []byte) bool {
		vfs := diagAttr(msg, unixDiagVFS)
		return len(vfs) >= 8 && binary.NativeEndian.Uint32(vfs[4:]) == unix.Major(dev)<<20|unix.Minor(dev) &&
			binary.NativeEndian.Uint32(vfs) == uint32(ino)
	})
	for _, l := range found {
		bound, err := s.heldListenerFile(l)
		switch {
		case err == nil:
			if bound.Dev == dev && bound.Ino == ino {
				return true
			}
		case errors.Is(err, unix.EPERM) && s.sharedNetNS:
			// Only a daemon with CAP_NET_ADMIN over the namespace may
			// open a socket's file (SIOCUNIXFILE): a rootless one in
			// the host's has the 32-bit match and the holding.
			if ino <= 0xffffffff {
				return true
			}
		}
	}
	return false
}

// siocUnixFile (linux/un.h) opens the file a unix socket is bound to,
// with O_PATH.
const siocUnixFile = unix.SIOCPROTOPRIVATE + 0

// heldListenerFile is the file that the listener whose socket inode is ino
// is bound to, from a copy of the fd of a session process holding it;
// ENOENT when none does. A listener nobody in the session holds is not
// the session's.
func (s *supervisor) heldListenerFile(ino uint32) (unix.Stat_t, error) {
	var bound unix.Stat_t
	pid, fd, ok := s.sessionHolder(ino)
	if !ok {
		return bound, unix.ENOENT
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return bound, err
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return bound, err
	}
	defer unix.Close(sock)
	// The process may have ended and its pid and fd number gone to
	// others since /proc was read: the copy must be that socket.
	var st unix.Stat_t
	if err := unix.Fstat(sock, &st); err != nil || st.Mode&modeType != modeSock || st.Ino != uint64(ino) {
		return bound, unix.ENOENT
	}
	file, err := unix.IoctlRetInt(sock, siocUnixFile)
	if err != nil {
		return bound, err
	}
	defer unix.Close(file)
	err = unix.Fstat(file, &bound)
	return bound, err
}

// abstractListener says whose the listener bound to the abstract name is
// (name with its leading NUL, as the address has it).
func (s *supervisor) abstractListener(name []byte) listenerOwner {
	return s.whoseListener(udiagShowName, func(msg []byte) bool {
		return bytes.Equal(diagAttr(msg, unixDiagName), name)
	})
}

type listenerOwner int

const (
	listenerNone listenerOwner = iota
	listenerOthers
	listenerOwn
)

// whoseListener finds, through sock_diag, the unix sockets listening in
// diag's namespace that match accepts (show says which attributes it
// reads), and says whose they are.
func (s *supervisor) whoseListener(show uint32, match func(msg []byte) bool) listenerOwner {
	found := s.listeners(show, match)
	switch {
	case len(found) == 0:
		return listenerNone
	case !s.sharedNetNS:
		return listenerOwn
	}
	for _, ino := range found {
		if s.sessionHolds(ino) {
			return listenerOwn
		}
	}
	return listenerOthers
}

// listeners are the socket inodes of the unix sockets listening in diag's
// namespace that match accepts; none when sock_diag fails.
func (s *supervisor) listeners(show uint32, match func(msg []byte) bool) []uint32 {
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	if s.diag < 0 && s.openDiag != nil {
		// Not made, the listener is nobody's found: refused as another's
		// would be (ownListener), and tried again on the next connect.
		if fd, err := s.openDiag(); err == nil {
			s.diag, s.openDiag = fd, nil
		}
	}
	if s.diag < 0 {
		return nil
	}
	req := make([]byte, nlmsgHdrSize+unixDiagReqSz)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[nlmsgHdrSize] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(req[nlmsgHdrSize+4:], 1<<tcpListen)
	binary.NativeEndian.PutUint32(req[nlmsgHdrSize+12:], show)
	if _, err := unix.Write(s.diag, req); err != nil {
		return nil
	}
	var found []uint32
	buf := make([]byte, 32<<10)
	for done := false; !done; {
		n, _, err := unix.Recvfrom(s.diag, buf, 0)
		if err != nil {
			return nil
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE, unix.NLMSG_ERROR:
				done = true
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(m.Data) >= unixDiagMsgSz && match(m.Data) {
					found = append(found, binary.NativeEndian.Uint32(m.Data[4:]))
				}
			}
		}
	}
	return found
}

// diagAttr is the payload of a unix_diag_msg's attribute typ, nil when
// it has none.
func diagAttr(msg []byte, typ uint16) []byte {
	if len(msg) < unixDiagMsgSz {
		return nil
	}
	for a := msg[unixDiagMsgSz:]; len(a) >= 4; {
		l, t := int(binary.NativeEndian.Uint16(a)), binary.NativeEndian.Uint16(a[2:])
		if l < 4 || l > len(a) {
			return nil
		}
		if t == typ {
			return a[4:l]
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return nil
}

// sessionHolds says whether the sandbox's init or a descendant of it
// holds an fd of the socket whose inode is ino. The init is a child
// subreaper, so every process of the session stays below it. A socket
// reaches a process only by being made there, inherited or passed over
// another unix socket, all of which the session's own connects confine
// to the session.
func (s *supervisor) sessionHolds(ino uint32) bool {
	_, _, ok := s.sessionHolder(ino)
	return ok
}

// sessionHolder is a process of the session holding the socket whose
// inode is ino, and the number of its fd.
func (s *supervisor) sessionHolder(ino uint32) (pid, fd int, ok bool) {
	want := "socket:[" + strconv.FormatUint(uint64(ino), 10) + "]"
	for _, pid := range descendants(s.init) {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if l, err := os.Readlink(dir + f.Name()); err == nil && l == want {
				if n, err := strconv.Atoi(f.Name()); err == nil {
					return pid, n, true
				}
			}
		}
	}
	return 0, 0, false
}

// descendants is pid and every process below it, read from each task's
// children list.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		p := strconv.Itoa(out[i])
		tasks, err := os.ReadDir("/proc/" + p + "/task")
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + p + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// emulateBind answers a bind() of a sandbox in the host's network
// namespace under network none: an abstract name would be the host's, and
// is refused; a path is bound by the daemon, on the thread with the
// sandbox's file credentials, in the directory it resolved and judged, as
// Landlock would judge a socket made there; every other bind is the
// kernel's (cont). Performed rather than continued, since the sandbox
// could change the address in its memory once judged.
func (s *supervisor) emulateBind(n seccompNotif) (errno syscall.Errno, cont bool, d *sandboxdv1.Denial) {
	targetFd := int(int32(n.Data.Args[0]))
	addrLen := int(int32(n.Data.Args[2]))
	switch {
	case addrLen < 0 || addrLen > sockaddrStorageSize:
		return unix.EINVAL, false, nil
	case addrLen <= 2:
		// A bare family autobinds a name the kernel picks; the length is
		// in a register, so the kernel checks what was judged.
		return 0, true, nil
	}
	v := &sandboxView{root: s.root, tid: int(n.Pid), deny: s.writes.Deny}
	addr := make([]byte, addrLen)
	readErr := v.readMemory(n.Data.Args[1], addr)
	sock, err := s.targetFd(&n, targetFd)
	if !notificationValid(s.rc, n.ID) {
		closeIfOpen(sock)
		return unix.ESRCH, false, nil
	}
	switch {
	case err != nil:
		return errnoOrEPERM(err), false, nil
	case readErr != nil:
		unix.Close(sock)
		return errnoOrEPERM(readErr), false, nil
	}
	defer unix.Close(sock)
	family, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	switch {
	case err != nil:
		// Not knowing the family, the daemon cannot tell an abstract
		// bind from another: refused, never let through.
		return errnoOrEPERM(err), false, nil
	case family != unix.AF_UNIX:
		// Network none leaves no other family but netlink, whose
		// address means the same whatever the sandbox does to it.
		return 0, true, nil
	}
	if binary.NativeEndian.Uint16(addr) != unix.AF_UNIX || addrLen > unix.SizeofSockaddrUnix {
		return unix.EINVAL, false, nil
	}
	if addr[2] == 0 {
		return unix.EPERM, false, &sandboxdv1.Denial{Field: "network.mode", Operation: "bind", Target: unixTarget(addr), Errno: "EPERM"}
	}
	p := unixPath(addr)
	base := path.Base(p)
	switch {
	case strings.HasSuffix(p, "/"):
		return unix.ENOENT, false, nil
	case base == "." || base == "..":
		return unix.EEXIST, false, nil
	}
	dirfd, dir, err := v.pinnedName(atFdcwd, path.Dir(p), lookupOpts{top: "/", follow: true, deny: v.deny})
	var dp *deniedPath
	switch {
	case errors.As(err, &dp):
		return unix.EACCES, false, &sandboxdv1.Denial{Field: "filesystem.deny", Operation: "bind", Target: dp.path, Errno: "EACCES"}
	case err != nil:
		return errnoOrEPERM(err), false, nil
	}
	defer unix.Close(dirfd)
	if r := s.writes.create(path.Join(dir.Path, base), modeSock); r != nil {
		return r.errno(), false, &sandboxdv1.Denial{Field: r.Field, Operation: "bind", Target: r.Path, Errno: r.Errno}
	}
	return errnoOrEPERM(unix.Bind(sock, &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + base})), false, nil
}

// unixPath is the path of a unix address, up to its first NUL; an
// abstract address has none.
func unixPath(addr []byte) string {
	path := addr[2:]
	if i := bytes.IndexByte(path, 0); i >= 0 {
		path = path[:i]
	}
	return string(path)
}

// unixTarget names a unix address as a record does: unix:PATH, or
// unix:@NAME for an abstract one.
func unixTarget(addr []byte) string {
	if len(addr) > 2 && addr[2] == 0 {
		return "unix:@" + string(addr[3:])
	}
	return "unix:" + unixPath(addr)
}

// inetUnreached are the answers by which a private network namespace
// refuses an inet connect: no route out, or, on its own loopback, nothing
// listening where the sandbox may have expected a host service.
var inetUnreached = map[syscall.Errno]bool{
	unix.ENETUNREACH: true, unix.EHOSTUNREACH: true, unix.ENETDOWN: true,
	unix.EADDRNOTAVAIL: true, unix.ECONNREFUSED: true,
}

// inetDenial is the record of an inet connect to addr that got errno,
// nil when it was not refused. A non-blocking connect is still in progress
// (EINPROGRESS) when the call returns and not a refusal yet; on the
// loopback a refusal is already there, though, and visible without
// reading SO_ERROR, which would take it from the sandbox.
func inetDenial(sock int, addr []byte, errno syscall.Errno) *sandboxdv1.Denial {
	if errno == unix.EINPROGRESS {
		pfd := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLOUT}}
		if n, err := unix.Poll(pfd, 0); err != nil || n != 1 || pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) != unix.POLLERR|unix.POLLHUP {
			return nil
		}
		errno = unix.ECONNREFUSED
	}
	if !inetUnreached[errno] {
		return nil
	}
	target, ok := inetTarget(addr)
	if !ok {
		return nil
	}
	return connectDenial(target, errno)
}

// inetTarget is addr as ADDR:PORT, an IPv6 address in brackets.
func inetTarget(addr []byte) (string, bool) {
	if len(addr) < 2 {
		return "", false
	}
	switch binary.NativeEndian.Uint16(addr) {
	case unix.AF_INET:
		if len(addr) >= unix.SizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(addr[4:8])), binary.BigEndian.Uint16(addr[2:4])).String(), true
		}
	case unix.AF_INET6:
		if len(addr) >= unix.SizeofSockaddrInet6 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(addr[8:24])), binary.BigEndian.Uint16(addr[2:4])).String(), true
		}
	}
	return "", false
}

func connectDenial(target string, errno syscall.Errno) *sandboxdv1.Denial {
	return &sandboxdv1.Denial{Field: "network.mode", Operation: "connect", Target: target, Errno: unix.ErrnoName(errno)}
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
func (s *supervisor) track(fd int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	if s.inFlight == nil {
		s.inFlight = map[int]bool{}
	}
	s.inFlight[fd] = true
	return true
}

// untrack runs before the duplicate is closed, so stop never shuts down
// an fd number that was reused meanwhile.
func (s *supervisor) untrack(fd int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, fd)
}
