package launcherlinux

import (
	"fmt"
	"runtime"

	"github.com/sandboxd/sandboxd/launcher"
)

// SeccompOptions selects the policy-dependent parts of the filter.
type SeccompOptions struct {
	// RestrictSocketFamilies allows only inet, inet6 and netlink sockets: in
	// a private network namespace those reach nothing outside, while unix
	// sockets would still reach host daemons through the visible filesystem
	// and vsock would reach the hypervisor.
	RestrictSocketFamilies bool
	// NoSockets makes socket() fail for every family: with no network
	// namespace there is no private loopback to allow. socketpair stays.
	NoSockets bool
	// NoUnixSockets makes socket(AF_UNIX) fail: with no mount namespace
	// the daemon's socket and every other host socket would be reachable.
	NoUnixSockets bool
	// NoSysVIPC denies SysV IPC and POSIX message queues, which without an
	// ipc namespace are the host's.
	NoSysVIPC bool
	// Notify installs the filter with a listener that the daemon holds
	// (SECCOMP_RET_USER_NOTIF): each refusal above reaches the daemon,
	// which always answers EPERM and records it, and every write-intent
	// filesystem call reaches it too, which it lets the kernel carry out
	// (SECCOMP_USER_NOTIF_FLAG_CONTINUE) after recording whether the
	// mounts and Landlock will refuse it. Without a listener, notified
	// calls fail with ENOSYS: refused all the same.
	//
	// Every call that changes an inode's metadata without writing a name
	// (mode, owner, times, extended attributes, inode flags, fs-verity)
	// reaches the daemon too: in a mount namespace the read-only mounts
	// refuse it and the daemon only records that; without one (the
	// landlock set, which Landlock cannot confine there) the daemon
	// performs it itself, on the inode it resolved, if the policy lets it.
	Notify bool
	// NotifyLookups, with Notify, hands the daemon every call that looks
	// a name up to read what it names (stat, access, readlink, xattrs,
	// statfs, chdir, inotify watches, O_PATH opens): without a mount
	// namespace to mask the deny paths, the daemon performs them so that
	// a deny path's metadata never reaches the sandbox. openat2 is
	// refused whole (ENOSYS, as before Linux 5.6; programs fall back to
	// openat): its flags are in memory, so one the daemon let through
	// could turn into an O_PATH open of a deny path after it looked.
	NotifyLookups bool
	// NotifyConnect, with Notify, hands every connect() to the daemon,
	// which performs it: a filter cannot read the address a unix socket is
	// connected to, nor learn what an inet connect got.
	NotifyConnect bool
	// UnixStream, with NotifyConnect and one of RestrictSocketFamilies,
	// NoSockets or NoUnixSockets, also lets socket() make unix stream
	// sockets, whose connects reach the session socket, if any, and the
	// session's own listeners. socket() still refuses the other unix types:
	// a datagram socket reaches any path through sendto(), with no
	// connect() to intercept.
	UnixStream bool
	// NotifyBind, with Notify, hands every bind() to the daemon: without a
	// network namespace, an abstract name the sandbox bound would be the
	// host's, and only the daemon can read which one the call names.
	NotifyBind bool
	// NoSetID refuses set-user-ID and set-group-ID bits in every mode the
	// sandbox passes (chmod family, open and openat creating, creat,
	// mkdir, mknod): a file made through an ID-mapped write root is owned
	// on the host by the root's owner, root for a root caller's
	// workspace. openat2 keeps its mode in memory the sandbox may change
	// after any look, so it is refused whole (ENOSYS, as before Linux
	// 5.6: programs fall back to openat).
	NoSetID bool
}

// setIDBits are S_ISUID and S_ISGID.
const setIDBits = 0o6000

// modeCall is a call that takes a mode in a register: at modeArg, and,
// where flagsArg >= 0, only when its flags create (O_CREAT, O_TMPFILE).
type modeCall struct {
	name              string
	nr                uint32
	modeArg, flagsArg int
}

var amd64ModeCalls = []modeCall{
	{"chmod", 90, 1, -1}, {"fchmod", 91, 1, -1}, {"fchmodat", 268, 2, -1}, {"fchmodat2", 452, 2, -1},
	{"creat", nrCreat, 1, -1}, {"mkdir", nrMkdir, 1, -1}, {"mkdirat", nrMkdirat, 2, -1},
	{"mknod", nrMknod, 1, -1}, {"mknodat", nrMknodat, 2, -1},
	{"open", nrOpen, 2, 1}, {"openat", nrOpenat, 3, 2},
}

// openCreates are the open flags that make a file: O_CREAT and
// __O_TMPFILE.
const openCreates = 0x40 | 0x400000

const (
	bpfLdAbsW  = 0x20
	bpfJeqK    = 0x15
	bpfJgeK    = 0x35
	bpfJsetK   = 0x45
	bpfAndK    = 0x54
	bpfRetK    = 0x06
	retAllow   = 0x7fff0000
	retNotify  = 0x7fc00000
	retKill    = 0x80000000
	retErrno   = 0x00050000
	errEPERM   = 1
	errENOSYS  = 38
	auditX8664 = 0xc000003e
	x32Bit     = 0x40000000

	offNr   = 0
	offArch = 4
	offArg0 = 16

	tiocsti   = 0x5412
	tioclinux = 0x541c

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16

	sockStream = 1
	// sockTypeFlags are the flags socket() takes in its type argument.
	sockTypeFlags = 0x800 | 0x80000

	// Every CLONE_NEW* flag: a sandbox must not make namespaces of its own
	// (a new user namespace would hand it capabilities again).
	cloneNewFlags = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

	// openWriteFlags are the open() flags that can change the filesystem:
	// O_WRONLY, O_RDWR, O_CREAT, O_TRUNC. O_TMPFILE carries O_WRONLY or
	// O_RDWR by rule.
	openWriteFlags = 0x1 | 0x2 | 0x40 | 0x200
	// oPath opens a name without reading it, which Landlock does not
	// check.
	oPath = 0x200000
)

// syscallName is an amd64 syscall number with its name, which denial
// records carry.
type syscallName struct {
	name string
	nr   uint32
}

// amd64 syscall numbers of what the filter denies. The filter is built for the
// architecture the daemon runs on; other architectures are refused rather
// than left unfiltered.
var amd64Denied = []syscallName{
	{"ptrace", 101}, {"syslog", 103}, {"uselib", 134},
	{"ustat", 136}, {"sysfs", 139}, {"vhangup", 153}, {"pivot_root", 155},
	{"_sysctl", 156}, {"acct", 163}, {"settimeofday", 164}, {"mount", 165},
	{"umount2", 166}, {"swapon", 167}, {"swapoff", 168}, {"reboot", 169},
	{"iopl", 172}, {"ioperm", 173}, {"create_module", 174}, {"init_module", 175},
	{"delete_module", 176}, {"quotactl", 179}, {"nfsservctl", 180},
	{"lookup_dcookie", 212}, {"clock_settime", 227}, {"kexec_load", 246},
	{"add_key", 248}, {"request_key", 249}, {"keyctl", 250},
	{"unshare", 272}, {"move_pages", 279}, {"perf_event_open", 298},
	{"fanotify_init", 300}, {"name_to_handle_at", 303}, {"open_by_handle_at", 304},
	{"clock_adjtime", 305}, {"setns", 308}, {"process_vm_readv", 310},
	{"process_vm_writev", 311}, {"kcmp", 312}, {"finit_module", 313},
	{"kexec_file_load", 320}, {"bpf", 321}, {"userfaultfd", 323},
	{"io_uring_setup", 425}, {"io_uring_enter", 426}, {"io_uring_register", 427},
	{"open_tree", 428}, {"move_mount", 429}, {"fsopen", 430}, {"fsconfig", 431},
	{"fsmount", 432}, {"fspick", 433}, {"mount_setattr", 442},
	{"quotactl_fd", 443}, {"open_tree_attr", 467},
	{"adjtimex", 159},
}

// amd64SysVIPC are SysV IPC and POSIX message queue syscalls.
var amd64SysVIPC = []syscallName{
	{"shmget", 29}, {"shmat", 30}, {"shmctl", 31}, {"semget", 64}, {"semop", 65},
	{"semctl", 66}, {"shmdt", 67}, {"msgget", 68}, {"msgsnd", 69}, {"msgrcv", 70},
	{"msgctl", 71}, {"semtimedop", 220}, {"mq_open", 240}, {"mq_unlink", 241},
	{"mq_timedsend", 242}, {"mq_timedreceive", 243}, {"mq_notify", 244}, {"mq_getsetattr", 245},
}

const (
	nrIoctl   = 16
	nrSocket  = 41
	nrConnect = 42
	nrBind    = 49
	nrClone   = 56
	nrClone3  = 435

	nrOpen      = 2
	nrTruncate  = 76
	nrRename    = 82
	nrMkdir     = 83
	nrRmdir     = 84
	nrCreat     = 85
	nrLink      = 86
	nrUnlink    = 87
	nrSymlink   = 88
	nrMknod     = 133
	nrOpenat    = 257
	nrMkdirat   = 258
	nrMknodat   = 259
	nrUnlinkat  = 263
	nrRenameat  = 264
	nrLinkat    = 265
	nrSymlinkat = 266
	nrRenameat2 = 316
	nrOpenat2   = 437
	nrUnshare   = 272
	nrSetns     = 308
	nrPtrace    = 101
)

// amd64WriteCalls are the filesystem calls that create, change or remove a
// name, besides open and openat, which are notified only when their flags
// ask to write: a read-only open, the commonest call there is, never
// waits for the daemon.
var amd64WriteCalls = []syscallName{
	{"creat", nrCreat}, {"truncate", nrTruncate}, {"mkdir", nrMkdir}, {"mkdirat", nrMkdirat},
	{"mknod", nrMknod}, {"mknodat", nrMknodat}, {"unlink", nrUnlink}, {"unlinkat", nrUnlinkat},
	{"rmdir", nrRmdir}, {"rename", nrRename}, {"renameat", nrRenameat}, {"renameat2", nrRenameat2},
	{"link", nrLink}, {"linkat", nrLinkat}, {"symlink", nrSymlink}, {"symlinkat", nrSymlinkat},
	{"openat2", nrOpenat2},
}

// Numbers of the metadata and lookup calls the supervisor dispatches on.
const (
	nrStat, nrLstat, nrNewfstatat, nrStatx        = 4, 6, 262, 332
	nrAccess, nrFaccessat, nrFaccessat2           = 21, 269, 439
	nrReadlink, nrReadlinkat                      = 89, 267
	nrGetxattr, nrLgetxattr, nrGetxattrat         = 191, 192, 464
	nrListxattr, nrLlistxattr, nrListxattrat      = 194, 195, 465
	nrStatfs, nrChdir, nrInotifyAddWatch          = 137, 80, 254
	nrFileGetattr, nrFileSetattr                  = 468, 469
	nrChmod, nrFchmod, nrFchmodat, nrFchmodat2    = 90, 91, 268, 452
	nrChown, nrFchown, nrLchown, nrFchownat       = 92, 93, 94, 260
	nrUtime, nrUtimes, nrFutimesat, nrUtimensat   = 132, 235, 261, 280
	nrSetxattr, nrLsetxattr, nrFsetxattr          = 188, 189, 190
	nrRemovexattr, nrLremovexattr, nrFremovexattr = 197, 198, 199
	nrSetxattrat, nrRemovexattrat                 = 463, 466
)

// amd64MetaCalls change an inode's mode, owner, times or extended
// attributes. Landlock governs none of them.
var amd64MetaCalls = []syscallName{
	{"chmod", 90}, {"fchmod", 91}, {"fchmodat", 268}, {"fchmodat2", 452},
	{"chown", 92}, {"fchown", 93}, {"lchown", 94}, {"fchownat", 260},
	{"utime", 132}, {"utimes", 235}, {"futimesat", 261}, {"utimensat", 280},
	{"setxattr", 188}, {"lsetxattr", 189}, {"fsetxattr", 190},
	{"removexattr", 197}, {"lremovexattr", 198}, {"fremovexattr", 199},
	{"setxattrat", 463}, {"removexattrat", 466}, {"file_setattr", 469},
}

// amd64LookupCalls read what a name names, or make it the working
// directory or a watch, without opening it for reading: Landlock checks
// none of them.
var amd64LookupCalls = []syscallName{
	{"stat", 4}, {"lstat", 6}, {"newfstatat", 262}, {"statx", 332},
	{"access", 21}, {"faccessat", 269}, {"faccessat2", 439},
	{"readlink", 89}, {"readlinkat", 267},
	{"getxattr", 191}, {"lgetxattr", 192}, {"listxattr", 194}, {"llistxattr", 195},
	{"getxattrat", 464}, {"listxattrat", 465}, {"file_getattr", 468},
	{"statfs", 137}, {"chdir", 80}, {"inotify_add_watch", 254},
}

// inodeIoctl is an ioctl that changes an inode through any fd of it, one
// opened read-only or O_PATH included: the kernel asks only that the
// caller own the inode. size is how many bytes of argument it reads.
type inodeIoctl struct {
	name string
	cmd  uint32
	size int
}

var inodeIoctls = []inodeIoctl{
	{"FS_IOC_SETFLAGS", 0x40086602, 4}, {"FS_IOC32_SETFLAGS", 0x40046602, 4},
	{"FS_IOC_FSSETXATTR", 0x401c5820, 28},
	{"FS_IOC_SETVERSION", 0x40087602, 4}, {"FS_IOC32_SETVERSION", 0x40047602, 4},
	{"EXT4_IOC_SETVERSION", 0x40086604, 4}, {"EXT4_IOC32_SETVERSION", 0x40046604, 4},
	{"FS_IOC_ENABLE_VERITY", 0x40806685, 128},
	{"FS_IOC_SET_ENCRYPTION_POLICY", 0x800c6613, 12},
	{"BTRFS_IOC_SUBVOL_SETFLAGS", 0x4008941a, 8},
}

// SeccompProgram builds the filter the sandboxed command runs under.
func SeccompProgram(o SeccompOptions) ([]SockFilter, error) {
	if runtime.GOARCH != "amd64" {
		return nil, &launcher.Unenforceable{
			Field: "process", Mechanism: "seccomp filter for " + runtime.GOARCH,
			Found: "sandboxd has syscall tables for amd64 only", Remedy: "run sandboxd on amd64",
		}
	}
	var p []SockFilter
	ld := func(off uint32) { p = append(p, SockFilter{Code: bpfLdAbsW, K: off}) }
	jeq := func(k uint32, jt, jf uint8) { p = append(p, SockFilter{Code: bpfJeqK, Jt: jt, Jf: jf, K: k}) }
	jset := func(k uint32, jt, jf uint8) { p = append(p, SockFilter{Code: bpfJsetK, Jt: jt, Jf: jf, K: k}) }
	ret := func(k uint32) { p = append(p, SockFilter{Code: bpfRetK, K: k}) }
	// What the policy refuses: the daemon answers EPERM when it holds the
	// listener, the filter itself when there is none.
	deny := uint32(retErrno | errEPERM)
	if o.Notify {
		deny = retNotify
	}

	ld(offArch)
	jeq(auditX8664, 1, 0)
	ret(retKill)
	ld(offNr)
	// x32 syscalls reach the same kernel entry points under other numbers.
	// Refused by the filter itself: no program uses them by accident, and
	// the daemon could not name them.
	p = append(p, SockFilter{Code: bpfJgeK, Jt: 0, Jf: 1, K: x32Bit})
	ret(retErrno | errEPERM)

	for _, s := range amd64Denied {
		jeq(s.nr, 0, 1)
		ret(deny)
	}
	// clone3 passes its flags in memory the filter cannot read; ENOSYS makes
	// libc fall back to clone, whose flags it can. Not a refusal of the
	// policy, so never notified.
	jeq(nrClone3, 0, 1)
	ret(retErrno | errENOSYS)

	jeq(nrClone, 0, 3)
	ld(offArg0)
	jset(cloneNewFlags, 0, 1)
	ret(deny)

	// TIOCSTI and TIOCLINUX push input into a terminal. The kernel reads the
	// command as 32 bits, so compare only the low word: that also catches
	// the variant with high bits set. No later rule is about ioctl, so the
	// block ends in an answer.
	var ioctlNotified []inodeIoctl
	if o.Notify {
		ioctlNotified = inodeIoctls
	}
	ld(offNr)
	jeq(nrIoctl, 0, uint8(6+2*len(ioctlNotified)))
	ld(offArg0 + 8)
	for _, c := range []uint32{tiocsti, tioclinux} {
		jeq(c, 0, 1)
		ret(deny)
	}
	for _, c := range ioctlNotified {
		jeq(c.cmd, 0, 1)
		ret(retNotify)
	}
	ret(retAllow)

	ld(offNr)
	if o.NoSetID {
		refuse := uint32(retErrno | errEPERM)
		refuseOpenat2 := uint32(retErrno | errENOSYS)
		if o.Notify {
			refuse, refuseOpenat2 = retNotify, retNotify
		}
		for _, c := range amd64ModeCalls {
			if c.flagsArg < 0 {
				jeq(c.nr, 0, 4)
			} else {
				jeq(c.nr, 0, 6)
				ld(offArg0 + 8*uint32(c.flagsArg))
				jset(openCreates, 0, 3)
			}
			ld(offArg0 + 8*uint32(c.modeArg))
			jset(setIDBits, 0, 1)
			ret(refuse)
			ld(offNr)
		}
		jeq(nrOpenat2, 0, 1)
		ret(refuseOpenat2)
	}
	if o.NotifyLookups && !o.NoSetID {
		jeq(nrOpenat2, 0, 1)
		ret(retErrno | errENOSYS)
	}
	if o.NoSysVIPC {
		for _, s := range amd64SysVIPC {
			jeq(s.nr, 0, 1)
			ret(deny)
		}
	}
	switch {
	case o.UnixStream && (o.NoSockets || o.NoUnixSockets):
		// socket(AF_UNIX, SOCK_STREAM, 0) is answered here; the other
		// unix types are refused, and the other families as NoSockets or
		// NoUnixSockets say. Every path returns, so no reload follows.
		other := uint32(retAllow)
		if o.NoSockets {
			other = deny
		}
		jeq(nrSocket, 0, 10)
		ld(offArg0)
		jeq(afUnix, 0, 7)
		ld(offArg0 + 8)
		p = append(p, SockFilter{Code: bpfAndK, K: ^uint32(sockTypeFlags)})
		jeq(sockStream, 0, 3)
		ld(offArg0 + 16)
		jeq(0, 0, 1)
		ret(retAllow)
		ret(deny)
		ret(other)
	case o.NoSockets:
		jeq(nrSocket, 0, 1)
		ret(deny)
	case o.NoUnixSockets:
		jeq(nrSocket, 0, 4)
		ld(offArg0)
		jeq(afUnix, 0, 1)
		ret(deny)
		ld(offNr)
	}
	// What follows the socket checks needs the syscall number again.
	reload := func() {
		if o.NotifyConnect || o.Notify {
			ld(offNr)
		}
	}
	switch {
	case o.RestrictSocketFamilies && o.UnixStream:
		ld(offNr)
		jeq(nrSocket, 0, 11)
		ld(offArg0)
		jeq(afInet, 9, 0)
		jeq(afInet6, 8, 0)
		jeq(afNetlink, 7, 0)
		jeq(afUnix, 0, 5)
		// The kernel reads type and protocol as ints: the low words are
		// all it acts on.
		ld(offArg0 + 8)
		p = append(p, SockFilter{Code: bpfAndK, K: ^uint32(sockTypeFlags)})
		jeq(sockStream, 0, 2)
		ld(offArg0 + 16)
		jeq(0, 1, 0)
		ret(deny)
		reload()
	case o.RestrictSocketFamilies:
		ld(offNr)
		jeq(nrSocket, 0, 5)
		ld(offArg0)
		jeq(afInet, 3, 0)
		jeq(afInet6, 2, 0)
		jeq(afNetlink, 1, 0)
		ret(deny)
		reload()
	}
	if o.NotifyConnect {
		jeq(nrConnect, 0, 1)
		ret(retNotify)
	}
	if o.NotifyBind {
		jeq(nrBind, 0, 1)
		ret(retNotify)
	}
	if o.Notify {
		notified := append(append([]syscallName(nil), amd64WriteCalls...), amd64MetaCalls...)
		openFlags := uint32(openWriteFlags)
		if o.NotifyLookups {
			notified = append(notified, amd64LookupCalls...)
			openFlags |= oPath
		}
		for _, s := range notified {
			jeq(s.nr, 0, 1)
			ret(retNotify)
		}
		// open takes its flags as the second argument, openat as the
		// third; both as ints.
		for _, c := range []struct{ nr, off uint32 }{{nrOpen, offArg0 + 8}, {nrOpenat, offArg0 + 16}} {
			jeq(c.nr, 0, 4)
			ld(c.off)
			jset(openFlags, 0, 1)
			ret(retNotify)
			ret(retAllow)
		}
	}
	ret(retAllow)
	if len(p) > 4096 {
		return nil, fmt.Errorf("seccomp program has %d instructions, the kernel takes 4096", len(p))
	}
	return p, nil
}
