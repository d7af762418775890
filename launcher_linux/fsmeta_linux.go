package launcherlinux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/unix"
)

// The calls of metaCalls, inodeIoctls and lookupCalls reach the
// daemon here. In a mount namespace the kernel refuses a metadata change
// outside the write roots (EROFS from the read-only mounts) and the masks
// hide the deny paths, so the daemon only records (judgeMeta). Without one
// (the landlock set) nothing in the kernel would refuse them, so the daemon
// performs each call itself (emulateFs): it resolves the name with the
// sandbox's credentials, one component at a time, to an O_PATH fd of the
// inode, judges where that inode is, and acts on that very fd. What it
// judged is what it acts on: a name the sandbox swaps meanwhile changes
// nothing, and an fd number it swaps is read once, by pidfd_getfd.

// fsCall is one decoded call of those families.
type fsCall struct {
	op string
	nr int32
	// meta says the call changes the inode; else it only reads or looks.
	meta bool
	// fd is the file the call acts on when byFd; else the name is looked
	// up from dirfd name.dirfd.
	byFd   bool
	fd     int32
	name   nameArg
	follow bool
	// emptyPath is AT_EMPTY_PATH: an empty name means the dirfd itself.
	emptyPath bool
	// flags are the open flags of an O_PATH open.
	flags uint64
	// ioctl is the ioctl command.
	ioctl *inodeIoctl
}

// fsCallNames names the calls of the three families.
var fsCallNames = sync.OnceValue(func() map[int32]string {
	m := map[int32]string{}
	for _, s := range append(append([]syscallName(nil), metaCalls()...), lookupCalls()...) {
		m[int32(s.nr)] = s.name
	}
	return m
})

var metaCallNrs = sync.OnceValue(func() map[int32]bool {
	m := map[int32]bool{}
	for _, s := range metaCalls() {
		m[int32(s.nr)] = true
	}
	return m
})

const (
	inDontFollow                                   = 0x02000000
	atStatxSyncType                                = 0x6000
	xattrSizeMax                                   = 65536
	xattrNameMax                                   = 255
	oPathFlags                                     = oPath | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fsverityMaxSalt, fsverityMaxSignature          = 32, 16128
	encryptionPolicyV1Size, encryptionPolicyV2Size = 12, 24
	encryptionPolicyV2                             = 2
	fsverityArgSaltSize, fsverityArgSaltPtr        = 12, 16
	fsverityArgSigSize, fsverityArgSigPtr          = 24, 32
)

// isOPathOpen says whether n is an open that only looks its name up: the
// kernel ignores every other flag of open and openat beside O_PATH. Both
// take their flags in a register, which the sandbox cannot change once the
// call is made; openat2, whose flags are in memory, never reaches the
// daemon where lookups are its (SeccompOptions.NotifyLookups).
func isOPathOpen(n *seccompNotif) (uint64, bool) {
	a := n.Data.Args
	switch n.Data.Nr {
	case nrOpen:
		return a[1], a[1]&oPath != 0
	case nrOpenat:
		return a[2], a[2]&oPath != 0
	}
	return 0, false
}

// decodeFsCall reads n's arguments; ok is false for a call the kernel
// would reject without looking anything up, which it is left to do.
func decodeFsCall(n *seccompNotif) (c fsCall, ok bool) {
	a := n.Data.Args
	c = fsCall{op: fsCallNames()[n.Data.Nr], nr: n.Data.Nr, meta: metaCallNrs()[n.Data.Nr], follow: true}
	path := func(i int) { c.name = nameArg{atFdcwd, a[i]} }
	at := func(i int) { c.name = nameArg{int32(a[i]), a[i+1]} }
	atFlags := func(flags uint64) {
		c.follow = flags&unix.AT_SYMLINK_NOFOLLOW == 0
		c.emptyPath = flags&unix.AT_EMPTY_PATH != 0
	}
	fd := func(i int) { c.byFd, c.fd = true, int32(a[i]) }
	switch n.Data.Nr {
	case nrChmod, nrChown, nrUtime, nrUtimes, nrSetxattr, nrRemovexattr,
		nrStat, nrAccess, nrGetxattr, nrListxattr, nrStatfs, nrChdir:
		path(0)
	case nrLchown, nrLsetxattr, nrLremovexattr, nrLstat, nrReadlink, nrLgetxattr, nrLlistxattr:
		path(0)
		c.follow = false
	case nrFchmod, nrFchown, nrFsetxattr, nrFremovexattr:
		fd(0)
	case nrFchmodat, nrFaccessat:
		at(0)
	case nrFchmodat2, nrFaccessat2:
		at(0)
		atFlags(a[3])
	case nrFchownat:
		at(0)
		atFlags(a[4])
	case nrNewfstatat:
		at(0)
		atFlags(a[3])
	case nrStatx:
		at(0)
		atFlags(a[2])
	case nrReadlinkat:
		at(0)
		c.follow = false
	case nrFutimesat:
		at(0)
		if a[1] == 0 {
			fd(0)
		}
	case nrUtimensat:
		at(0)
		atFlags(a[3])
		if a[1] == 0 {
			// futimens: the dirfd is the file.
			if int32(a[0]) == atFdcwd {
				return c, false
			}
			fd(0)
		}
	case nrSetxattrat, nrRemovexattrat, nrGetxattrat, nrListxattrat:
		at(0)
		atFlags(a[2])
	case nrInotifyAddWatch:
		c.name = nameArg{atFdcwd, a[1]}
		c.follow = a[2]&inDontFollow == 0
	case nrOpen:
		path(0)
		c.flags = a[1]
		c.follow = a[1]&unix.O_NOFOLLOW == 0
	case nrOpenat:
		at(0)
		c.flags = a[2]
		c.follow = a[2]&unix.O_NOFOLLOW == 0
	case nrIoctl:
		for i := range inodeIoctls {
			if inodeIoctls[i].cmd == uint32(a[1]) {
				c.ioctl = &inodeIoctls[i]
			}
		}
		if c.ioctl == nil {
			return c, false
		}
		c.op, c.meta = "ioctl "+c.ioctl.name, true
		fd(0)
	default:
		return c, false
	}
	return c, true
}

// judgeMeta records what the mounts refuse of a metadata change: the
// namespaces set's judgement, made to be recorded only.
func (s *supervisor) judgeMeta(n *seccompNotif) *sandboxdv1.Denial {
	c, ok := decodeFsCall(n)
	if !ok || !c.meta {
		return nil
	}
	v := &sandboxView{root: s.root, tid: int(n.Pid)}
	var p string
	var err error
	switch {
	case c.byFd:
		p, err = v.dirOf(c.fd)
	default:
		var name string
		if name, err = v.readString(c.name.addr); err != nil {
			return nil
		}
		if name == "" && c.emptyPath {
			p, err = v.dirOf(c.name.dirfd)
			break
		}
		var np namedPath
		np, err = v.name(c.name, lookupOpts{top: "/", follow: c.follow})
		if err == nil && !np.Exists {
			// The lookup fails, with EACCES where a mask stops it.
			if r := s.writes.searchMasked(np.Path); r != nil {
				return &sandboxdv1.Denial{Field: r.Field, Operation: c.op, Target: r.Path, Errno: r.Errno}
			}
			return nil
		}
		p = np.Path
	}
	if err != nil {
		return nil
	}
	r := s.writes.metaRefusal(p)
	if r == nil {
		return nil
	}
	return &sandboxdv1.Denial{Field: r.Field, Operation: c.op, Target: r.Path, Errno: r.Errno}
}

// setIDCall names the call of data when the filter notified it for a
// set-ID mode (or as openat2) under SeccompOptions.NoSetID, "" otherwise.
func setIDCall(data seccompData) string {
	if data.Nr == nrOpenat2 {
		return "openat2"
	}
	for _, c := range modeCalls() {
		if int32(c.nr) != data.Nr {
			continue
		}
		if c.flagsArg >= 0 && data.Args[c.flagsArg]&openCreates == 0 {
			return ""
		}
		if data.Args[c.modeArg]&setIDBits != 0 {
			return c.name
		}
	}
	return ""
}

// setIDDetail says why a set-ID mode is refused.
const setIDDetail = "set-user-ID and set-group-ID bits are refused where a write root is ID-mapped: what the sandbox makes there is owned on the host by the root's owner"

// refuseSetID answers a call setIDCall named: EPERM for a set-ID mode,
// ENOSYS for openat2, whose mode and flags are in memory the sandbox can
// change after the daemon has read them.
func (s *supervisor) refuseSetID(n *seccompNotif) (syscall.Errno, *sandboxdv1.Denial) {
	op := setIDCall(n.Data)
	d := &sandboxdv1.Denial{Field: "filesystem.write", Operation: op, Errno: "EPERM", Detail: setIDDetail}
	errno := unix.EPERM
	if op == "openat2" {
		errno, d.Errno = unix.ENOSYS, "ENOSYS"
		d.Detail = "openat2 is not offered where a write root is ID-mapped (its mode could turn set-ID after the daemon looked); programs fall back to openat"
	}
	v := &sandboxView{root: s.root, tid: int(n.Pid)}
	a := n.Data.Args
	var p string
	switch n.Data.Nr {
	case nrFchmod:
		p, _ = v.dirOf(int32(a[0]))
	case nrChmod, nrCreat, nrMkdir, nrMknod, nrOpen:
		np, _ := v.name(nameArg{atFdcwd, a[0]}, lookupOpts{top: "/", follow: true})
		p = np.Path
	default:
		np, _ := v.name(nameArg{int32(a[0]), a[1]}, lookupOpts{top: "/", follow: true})
		p = np.Path
	}
	d.Target = p
	return errno, d
}

// privilegedXattr is the name of the extended attribute the setxattr call
// of n sets when it is one that grants privilege on the host (file
// capabilities, trusted.*), "" otherwise. The kernel refuses it to the
// sandbox, which holds no capability; the daemon refuses it first to say
// why. Reading the name races with the sandbox only towards letting the
// kernel decide.
func (s *supervisor) privilegedXattr(n *seccompNotif) string {
	idx := map[int32]int{nrSetxattr: 1, nrLsetxattr: 1, nrFsetxattr: 1, nrSetxattrat: 3}
	i, ok := idx[n.Data.Nr]
	if !ok {
		return ""
	}
	v := &sandboxView{root: s.root, tid: int(n.Pid)}
	name, err := v.readString(n.Data.Args[i])
	if err != nil || name != "security.capability" && !strings.HasPrefix(name, "trusted.") {
		return ""
	}
	return name
}

// refusePrivilegedXattr answers the setxattr of a privileged name where a
// write root is ID-mapped.
func (s *supervisor) refusePrivilegedXattr(n *seccompNotif, name string) (syscall.Errno, *sandboxdv1.Denial) {
	d := &sandboxdv1.Denial{Field: "filesystem.write", Operation: fsCallNames()[n.Data.Nr], Errno: "EPERM",
		Detail: name + " grants privilege on the host: refused where a write root is ID-mapped, as what the sandbox makes there is owned by the root's owner"}
	if c, ok := decodeFsCall(n); ok {
		v := &sandboxView{root: s.root, tid: int(n.Pid)}
		if c.byFd {
			d.Target, _ = v.dirOf(c.fd)
		} else {
			np, _ := v.name(c.name, lookupOpts{top: "/", follow: c.follow})
			d.Target = np.Path
		}
	}
	return unix.EPERM, d
}

// fsAnswer is the daemon's answer to an emulated call.
type fsAnswer struct {
	val   int64
	errno syscall.Errno
	// cont lets the kernel carry the call out after all.
	cont bool
	// addfd, with hasFd, is an fd to install in the target as the
	// call's result.
	addfd          int
	hasFd, cloexec bool
	denial         *sandboxdv1.Denial
}

// emulateFs performs the call of n in the sandbox's place, on the thread
// that has the sandbox's credentials.
func (s *supervisor) emulateFs(n *seccompNotif, c fsCall) fsAnswer {
	v := &sandboxView{root: s.root, tid: int(n.Pid), args: n.Data.Args}
	deny := s.writes.Deny
	var fd int
	refuse := func(r *writeRefusal) fsAnswer {
		return fsAnswer{errno: r.errno(), denial: &sandboxdv1.Denial{Field: r.Field, Operation: c.op, Target: r.Path, Errno: r.Errno}}
	}
	if !c.byFd && c.emptyPath {
		// Since Linux 6.11 a NULL name with AT_EMPTY_PATH is the empty
		// name.
		var name string
		var err error
		if c.name.addr != 0 {
			name, err = v.readString(c.name.addr)
		}
		if err != nil {
			return fsAnswer{errno: unix.EFAULT}
		}
		if name == "" {
			if c.name.dirfd != atFdcwd {
				c.byFd, c.fd = true, c.name.dirfd
			} else {
				c.name.addr = 0
			}
		}
	}
	if c.byFd {
		if !c.meta {
			// No fd of the sandbox's names a deny path: the opens that
			// could make one are judged, and it has no other way in.
			return fsAnswer{cont: true}
		}
		var err error
		if fd, err = s.targetFd(n, int(c.fd)); err != nil {
			return fsAnswer{errno: errnoOrEPERM(err)}
		}
		defer unix.Close(fd)
		private, p, err := fdLocation(fd)
		if err != nil {
			return fsAnswer{errno: errnoOrEPERM(err)}
		}
		if !private {
			if r := s.writes.metaRefusal(p); r != nil {
				return refuse(r)
			}
		}
	} else {
		var err error
		var np namedPath
		o := lookupOpts{top: "/", follow: c.follow, deny: deny}
		if c.name.addr == 0 {
			fd, np, err = v.pinnedName(atFdcwd, ".", o)
		} else {
			fd, np, err = v.pinned(c.name, o)
		}
		var dp *deniedPath
		switch {
		case errors.As(err, &dp):
			return refuse(&writeRefusal{Field: "filesystem.deny", Errno: "EACCES", Path: dp.path})
		case err != nil:
			return fsAnswer{errno: errnoOrEPERM(err)}
		}
		defer unix.Close(fd)
		_, p, err := fdLocation(fd)
		if err != nil {
			return fsAnswer{errno: errnoOrEPERM(err)}
		}
		if coveredBy(p, deny) {
			return refuse(&writeRefusal{Field: "filesystem.deny", Errno: "EACCES", Path: p})
		}
		if c.meta {
			if r := s.writes.metaRefusal(p); r != nil {
				return refuse(r)
			}
		}
		if c.nr == nrChdir {
			// The working directory cannot be set from outside. Should
			// the sandbox swap the name to a deny path meanwhile, every
			// later lookup from there is judged from where it really is.
			return fsAnswer{cont: true}
		}
		if c.flags&oPath != 0 {
			if c.flags&unix.O_DIRECTORY != 0 && np.Type != modeDir {
				return fsAnswer{errno: unix.ENOTDIR}
			}
			nfd, err := unix.Dup(fd)
			if err != nil {
				return fsAnswer{errno: errnoOrEPERM(err)}
			}
			return fsAnswer{addfd: nfd, hasFd: true, cloexec: c.flags&unix.O_CLOEXEC != 0}
		}
	}
	val, err := s.perform(n, v, c, fd)
	return fsAnswer{val: val, errno: errnoOrEPERM(err)}
}

// targetFd is a duplicate of the calling thread's fd.
func (s *supervisor) targetFd(n *seccompNotif, fd int) (int, error) {
	if fd < 0 {
		return -1, unix.EBADF
	}
	pidfd, err := targetPidfd(int(n.Pid))
	if err != nil {
		return -1, err
	}
	defer unix.Close(pidfd)
	return unix.PidfdGetfd(pidfd, fd, 0)
}

// fdLocation is the path of what fd names on the host, which in the
// landlock set is the sandbox's too. A pipe, socket, anonymous inode or
// memfd is private: no name of the tree reaches it.
func fdLocation(fd int) (private bool, p string, err error) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false, "", err
	}
	if !strings.HasPrefix(link, "/") {
		return true, "", nil
	}
	// An unlinked file keeps the directory it was in: the sandbox could
	// not have moved it out of a write root first, nor unlinked it
	// outside one.
	p, deleted := strings.CutSuffix(link, " (deleted)")
	if deleted && strings.HasPrefix(p, "/memfd:") {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Nlink == 0 {
			return true, "", nil
		}
	}
	return false, p, nil
}

// perform carries out call c on fd, the inode it was judged for (an
// O_PATH fd of what the name resolved to, or a duplicate of the sandbox's
// own fd), with the arguments read from the target's memory and the
// results written back there.
func (s *supervisor) perform(n *seccompNotif, v *sandboxView, c fsCall, fd int) (int64, error) {
	a := v.args
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	switch c.nr {
	case nrChmod, nrFchmodat, nrFchmodat2:
		mode := map[int32]uint64{nrChmod: a[1], nrFchmodat: a[2], nrFchmodat2: a[2]}[c.nr]
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, err
		}
		if st.Mode&modeType == modeLnk {
			return 0, unix.EOPNOTSUPP
		}
		return 0, unix.Chmod(proc, uint32(mode))
	case nrFchmod:
		return 0, unix.Fchmod(fd, uint32(a[1]))
	case nrChown, nrLchown:
		return 0, unix.Fchownat(fd, "", int(int32(a[1])), int(int32(a[2])), unix.AT_EMPTY_PATH)
	case nrFchownat:
		return 0, unix.Fchownat(fd, "", int(int32(a[2])), int(int32(a[3])), unix.AT_EMPTY_PATH)
	case nrFchown:
		return 0, unix.Fchown(fd, int(int32(a[1])), int(int32(a[2])))
	case nrUtime, nrUtimes, nrFutimesat, nrUtimensat:
		return 0, s.performUtimes(v, c, fd)
	case nrSetxattr, nrLsetxattr, nrFsetxattr, nrSetxattrat:
		return 0, s.performSetxattr(v, c, fd, proc)
	case nrRemovexattr, nrLremovexattr, nrFremovexattr, nrRemovexattrat:
		idx := 1
		if c.nr == nrRemovexattrat {
			idx = 3
		}
		name, err := readXattrName(v, a[idx])
		if err != nil {
			return 0, err
		}
		if c.byFd {
			return 0, unix.Fremovexattr(fd, name)
		}
		return 0, unix.Removexattr(proc, name)
	case nrIoctl:
		return s.performIoctl(v, c, fd, a[2])
	case nrStat, nrLstat, nrNewfstatat:
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, err
		}
		return 0, writeStruct(v, a[map[int32]int{nrStat: 1, nrLstat: 1, nrNewfstatat: 2}[c.nr]], &st)
	case nrStatx:
		var st unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|int(a[2]&atStatxSyncType), int(uint32(a[3])), &st); err != nil {
			return 0, err
		}
		return 0, writeStruct(v, a[4], &st)
	case nrStatfs:
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil {
			return 0, err
		}
		return 0, writeStruct(v, a[1], &st)
	case nrAccess, nrFaccessat, nrFaccessat2:
		mode := map[int32]uint64{nrAccess: a[1], nrFaccessat: a[2], nrFaccessat2: a[2]}[c.nr]
		if c.nr == nrFaccessat2 && a[3]&^uint64(unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
			return 0, unix.EINVAL
		}
		// The sandbox's real and effective ids are the same: the
		// thread's fs ids answer for both.
		return 0, unix.Faccessat2(fd, "", uint32(mode), unix.AT_EMPTY_PATH|unix.AT_EACCESS)
	case nrReadlink, nrReadlinkat:
		buf, size := a[1], int64(a[2])
		if c.nr == nrReadlinkat {
			buf, size = a[2], int64(int32(a[3]))
		}
		if size <= 0 {
			return 0, unix.EINVAL
		}
		b := make([]byte, min(size, unix.PathMax))
		k, err := unix.Readlinkat(fd, "", b)
		if err != nil {
			return 0, err
		}
		return int64(k), v.writeMemory(buf, b[:k])
	case nrGetxattr, nrLgetxattr, nrGetxattrat:
		return s.performGetxattr(v, c, proc)
	case nrListxattr, nrLlistxattr, nrListxattrat:
		buf, size := a[1], a[2]
		if c.nr == nrListxattrat {
			buf, size = a[3], a[4]
		}
		b := make([]byte, min(size, xattrSizeMax))
		k, err := unix.Listxattr(proc, b)
		if err != nil {
			return 0, err
		}
		if size == 0 {
			return int64(k), nil
		}
		return int64(k), v.writeMemory(buf, b[:k])
	case nrInotifyAddWatch:
		ifd, err := s.targetFd(n, int(int32(a[0])))
		if err != nil {
			return 0, err
		}
		defer unix.Close(ifd)
		wd, err := unix.InotifyAddWatch(ifd, proc, uint32(a[2]))
		return int64(wd), err
	case nrFileGetattr, nrFileSetattr:
		// Linux 6.17's calls: answered as older kernels do, so programs
		// use FS_IOC_FSGETXATTR and FS_IOC_FSSETXATTR, judged above.
		return 0, unix.ENOSYS
	}
	return 0, unix.ENOSYS
}

// performUtimes sets times as utime, utimes, futimesat or utimensat asked.
func (s *supervisor) performUtimes(v *sandboxView, c fsCall, fd int) error {
	a := v.args
	var ts *[2]unix.Timespec
	var ptr uint64
	switch c.nr {
	case nrUtime:
		ptr = a[1]
		if ptr != 0 {
			var b [16]byte
			if err := v.readMemory(ptr, b[:]); err != nil {
				return unix.EFAULT
			}
			ts = &[2]unix.Timespec{
				{Sec: int64(binary.NativeEndian.Uint64(b[:]))},
				{Sec: int64(binary.NativeEndian.Uint64(b[8:]))},
			}
		}
	case nrUtimes, nrFutimesat:
		ptr = a[1]
		if c.nr == nrFutimesat {
			ptr = a[2]
		}
		if ptr != 0 {
			var tv [2]unix.Timeval
			if err := readStruct(v, ptr, &tv); err != nil {
				return err
			}
			ts = new([2]unix.Timespec)
			for i := range tv {
				if tv[i].Usec < 0 || tv[i].Usec >= 1000000 {
					return unix.EINVAL
				}
				ts[i] = unix.Timespec{Sec: tv[i].Sec, Nsec: tv[i].Usec * 1000}
			}
		}
	case nrUtimensat:
		if a[2] != 0 {
			ts = new([2]unix.Timespec)
			if err := readStruct(v, a[2], ts); err != nil {
				return err
			}
		}
	}
	var tp unsafe.Pointer
	if ts != nil {
		tp = unsafe.Pointer(ts)
	}
	if c.byFd {
		_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(tp), 0, 0, 0)
		return errnoErr(errno)
	}
	empty := []byte{0}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(tp), unix.AT_EMPTY_PATH, 0, 0)
	return errnoErr(errno)
}

func errnoErr(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// xattrArgs is struct xattr_args of the *xattrat calls.
type xattrArgs struct {
	Value uint64
	Size  uint32
	Flags uint32
}

func (s *supervisor) performSetxattr(v *sandboxView, c fsCall, fd int, proc string) error {
	a := v.args
	nameAt, value, size, flags := a[1], a[2], a[3], a[4]
	if c.nr == nrSetxattrat {
		if a[5] < uint64(unsafe.Sizeof(xattrArgs{})) {
			return unix.EINVAL
		}
		var xa xattrArgs
		if err := readStruct(v, a[4], &xa); err != nil {
			return err
		}
		nameAt, value, size, flags = a[3], xa.Value, uint64(xa.Size), uint64(xa.Flags)
	}
	name, err := readXattrName(v, nameAt)
	if err != nil {
		return err
	}
	if size > xattrSizeMax {
		return unix.E2BIG
	}
	data := make([]byte, size)
	if size > 0 {
		if err := v.readMemory(value, data); err != nil {
			return unix.EFAULT
		}
	}
	if c.byFd {
		return unix.Fsetxattr(fd, name, data, int(flags))
	}
	return unix.Setxattr(proc, name, data, int(flags))
}

func (s *supervisor) performGetxattr(v *sandboxView, c fsCall, proc string) (int64, error) {
	a := v.args
	nameAt, value, size := a[1], a[2], a[3]
	if c.nr == nrGetxattrat {
		if a[5] < uint64(unsafe.Sizeof(xattrArgs{})) {
			return 0, unix.EINVAL
		}
		var xa xattrArgs
		if err := readStruct(v, a[4], &xa); err != nil {
			return 0, err
		}
		nameAt, value, size = a[3], xa.Value, uint64(xa.Size)
	}
	name, err := readXattrName(v, nameAt)
	if err != nil {
		return 0, err
	}
	b := make([]byte, min(size, xattrSizeMax))
	k, err := unix.Getxattr(proc, name, b)
	if err != nil {
		return 0, err
	}
	if size == 0 {
		return int64(k), nil
	}
	return int64(k), v.writeMemory(value, b[:k])
}

// performIoctl replays an inode ioctl on fd with its argument copied from
// the target. fs-verity's argument points further, at a salt and a
// signature, which are copied too.
func (s *supervisor) performIoctl(v *sandboxView, c fsCall, fd int, arg uint64) (int64, error) {
	size := c.ioctl.size
	if c.ioctl.name == "FS_IOC_SET_ENCRYPTION_POLICY" {
		var version [1]byte
		if err := v.readMemory(arg, version[:]); err != nil {
			return 0, unix.EFAULT
		}
		if version[0] == encryptionPolicyV2 {
			size = encryptionPolicyV2Size
		}
	}
	b := make([]byte, size)
	if err := v.readMemory(arg, b); err != nil {
		return 0, unix.EFAULT
	}
	var keep [][]byte
	if c.ioctl.name == "FS_IOC_ENABLE_VERITY" {
		for _, f := range []struct{ size, ptr, max int }{
			{fsverityArgSaltSize, fsverityArgSaltPtr, fsverityMaxSalt},
			{fsverityArgSigSize, fsverityArgSigPtr, fsverityMaxSignature},
		} {
			n := int(binary.NativeEndian.Uint32(b[f.size:]))
			if n == 0 {
				continue
			}
			if n > f.max {
				return 0, unix.EMSGSIZE
			}
			buf := make([]byte, n)
			if err := v.readMemory(binary.NativeEndian.Uint64(b[f.ptr:]), buf); err != nil {
				return 0, unix.EFAULT
			}
			keep = append(keep, buf)
			binary.NativeEndian.PutUint64(b[f.ptr:], uint64(uintptr(unsafe.Pointer(&buf[0]))))
		}
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(c.ioctl.cmd), uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(keep)
	return 0, errnoErr(errno)
}

func readXattrName(v *sandboxView, addr uint64) (string, error) {
	name, err := v.readString(addr)
	switch {
	case err != nil:
		return "", unix.EFAULT
	case name == "" || len(name) > xattrNameMax:
		return "", unix.ERANGE
	}
	return name, nil
}

// readStruct fills *p from the target's memory at addr.
func readStruct[T any](v *sandboxView, addr uint64, p *T) error {
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
	if err := v.readMemory(addr, b); err != nil {
		return unix.EFAULT
	}
	return nil
}

// writeStruct copies *p into the target's memory at addr, as the kernel
// would have.
func writeStruct[T any](v *sandboxView, addr uint64, p *T) error {
	return v.writeMemory(addr, unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p)))
}

// writeMemory copies b into the target's memory at addr.
func (v *sandboxView) writeMemory(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := unix.ProcessVMWritev(v.tid, []unix.Iovec{{Base: &b[0], Len: uint64(len(b))}}, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}, 0)
	if err != nil || n != len(b) {
		return unix.EFAULT
	}
	return nil
}

// ptraceOnly is the one capability the emulating thread of a root daemon
// keeps: reading and writing the target's memory and taking its fds
// (process_vm_readv, pidfd_getfd) check the caller's real ids, which stay
// root's. It grants nothing on files.
const ptraceOnly = 1 << unix.CAP_SYS_PTRACE

// restrictThread gives the calling OS thread the sandbox's file
// credentials: fs ids uid and gid and no supplementary groups (a root
// daemon's sandbox has none), and no capability that bypasses file
// permissions. setgroups, setfsuid and capset act on the calling thread
// alone when made as raw system calls, which is what is wanted: the
// caller has locked the thread. restore gives the thread back what it had,
// so that it can return to the runtime: letting it end instead would send
// the death signal (Pdeathsig) to every sandbox init it happened to fork.
func restrictThread(uid, gid uint32) (restore func() error, err error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return nil, fmt.Errorf("capget: %w", err)
	}
	setCaps := func(c [2]unix.CapUserData) error {
		h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		if err := unix.Capset(&h, &c[0]); err != nil {
			return fmt.Errorf("capset: %w", err)
		}
		return nil
	}
	root := unix.Geteuid() == 0
	// Sized by asking first: room for the most groups there can be
	// (65536) would be 256 KiB allocated per supervised launch. The thread
	// is locked and nothing else changes its groups between the two calls.
	n, _, errno := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
	if errno != 0 {
		return nil, fmt.Errorf("getgroups: %w", errno)
	}
	groups := make([]uint32, n+1)
	n, _, errno = unix.RawSyscall(unix.SYS_GETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0)
	if errno != 0 {
		return nil, fmt.Errorf("getgroups: %w", errno)
	}
	groups = groups[:n]
	fsuid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	fsgid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	restore = func() error {
		if err := setCaps(caps); err != nil {
			return err
		}
		if root {
			if err := setThreadIDs(groups, uint32(fsuid), uint32(fsgid)); err != nil {
				return err
			}
		}
		// Changing the fs uid to or from 0 changes the effective set.
		return setCaps(caps)
	}
	if root {
		if err := setThreadIDs(nil, uid, gid); err != nil {
			return nil, errors.Join(err, restore())
		}
	}
	less := caps
	less[0].Effective &= ptraceOnly
	less[1].Effective = 0
	if err := setCaps(less); err != nil {
		return nil, errors.Join(err, restore())
	}
	return restore, nil
}

// setThreadIDs sets the calling thread's supplementary groups and fs ids.
func setThreadIDs(groups []uint32, uid, gid uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); errno != 0 {
		return fmt.Errorf("setgroups: %w", errno)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
	// Neither call reports failure; asked for an invalid id, each
	// returns the current one.
	if got, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); uint32(got) != uid {
		return fmt.Errorf("setfsuid %d: thread kept fs uid %d", uid, uint32(got))
	}
	if got, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); uint32(got) != gid {
		return fmt.Errorf("setfsgid %d: thread kept fs gid %d", gid, uint32(got))
	}
	return nil
}
