package launcherlinux

//go:generate sh -c "go run ./internal/sysnumgen -xsys \"$(go list -m -f {{.Dir}} golang.org/x/sys)\" -out ."

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

// modeCalls are those of the architecture's: arm64, like every
// architecture after it, has only the *at forms.
var modeCalls = presentOnly([]modeCall{
	{"chmod", nrChmod, 1, -1}, {"fchmod", nrFchmod, 1, -1}, {"fchmodat", nrFchmodat, 2, -1}, {"fchmodat2", nrFchmodat2, 2, -1},
	{"creat", nrCreat, 1, -1}, {"mkdir", nrMkdir, 1, -1}, {"mkdirat", nrMkdirat, 2, -1},
	{"mknod", nrMknod, 1, -1}, {"mknodat", nrMknodat, 2, -1},
	{"open", nrOpen, 2, 1}, {"openat", nrOpenat, 3, 2},
}, func(c modeCall) uint32 { return c.nr })

// openCreates are the open flags that make a file: O_CREAT and
// __O_TMPFILE.
const openCreates = 0x40 | 0x400000

const (
	bpfLdAbsW = 0x20
	bpfJeqK   = 0x15
	bpfJgeK   = 0x35
	bpfJsetK  = 0x45
	bpfAndK   = 0x54
	bpfRetK   = 0x06
	retAllow  = 0x7fff0000
	retNotify = 0x7fc00000
	retKill   = 0x80000000
	retErrno  = 0x00050000
	errEPERM  = 1
	errENOSYS = 38
	x32Bit    = 0x40000000

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

// syscallName is a syscall number of the architecture the daemon runs on
// with its name, which denial records carry.
type syscallName struct {
	name string
	nr   uint32
}

// calls are the named syscalls this architecture has, with their numbers.
// A name the generated tables lack is a mistake in this file, found by
// every test of the package.
func calls(names ...string) []syscallName {
	out := make([]syscallName, 0, len(names))
	for _, n := range names {
		nr, ok := sysnums[n]
		if !ok {
			panic("seccomp tables: no syscall " + n + "; add it to sysnumgen's Names and run go generate")
		}
		if present(nr) {
			out = append(out, syscallName{n, nr})
		}
	}
	return out
}

// present says a number is one of the architecture's syscalls, not the
// stand-in the tables give one it lacks.
func present(nr uint32) bool { return nr < absentNr }

func presentOnly[T any](all []T, nr func(T) uint32) []T {
	var out []T
	for _, c := range all {
		if present(nr(c)) {
			out = append(out, c)
		}
	}
	return out
}

// deniedCalls are what the filter denies. The filter is built for the
// architecture the daemon runs on, from tables generated from the kernel's
// headers (sysnum_*.go); an architecture without tables is refused rather
// than left unfiltered.
var deniedCalls = calls(
	"ptrace", "syslog", "uselib", "ustat", "sysfs", "vhangup", "pivot_root", "_sysctl", "acct",
	"settimeofday", "mount", "umount2", "swapon", "swapoff", "reboot", "iopl", "ioperm",
	"create_module", "init_module", "delete_module", "quotactl", "nfsservctl", "lookup_dcookie",
	"clock_settime", "kexec_load", "add_key", "request_key", "keyctl", "unshare", "move_pages",
	"perf_event_open", "fanotify_init", "name_to_handle_at", "open_by_handle_at", "clock_adjtime",
	"setns", "process_vm_readv", "process_vm_writev", "kcmp", "finit_module", "kexec_file_load",
	"bpf", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree",
	"move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "quotactl_fd",
	"open_tree_attr", "adjtimex",
)

// sysVIPCCalls are SysV IPC and POSIX message queue syscalls.
var sysVIPCCalls = calls(
	"shmget", "shmat", "shmctl", "semget", "semop", "semctl", "shmdt", "msgget", "msgsnd", "msgrcv",
	"msgctl", "semtimedop", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
	"mq_getsetattr",
)

// writeCalls are the filesystem calls that create, change or remove a
// name, besides open and openat, which are notified only when their flags
// ask to write: a read-only open, the commonest call there is, never
// waits for the daemon.
var writeCalls = calls(
	"creat", "truncate", "mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir",
	"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "openat2",
)

// metaCalls change an inode's mode, owner, times or extended
// attributes. Landlock governs none of them.
var metaCalls = calls(
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
	"utimes", "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
	"lremovexattr", "fremovexattr", "setxattrat", "removexattrat", "file_setattr",
)

// lookupCalls read what a name names, or make it the working
// directory or a watch, without opening it for reading: Landlock checks
// none of them.
var lookupCalls = calls(
	"stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", "readlink",
	"readlinkat", "getxattr", "lgetxattr", "listxattr", "llistxattr", "getxattrat", "listxattrat",
	"file_getattr", "statfs", "chdir", "inotify_add_watch",
)

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
	if seccompArch != runtime.GOARCH {
		return nil, &launcher.Unenforceable{
			Field: "process", Mechanism: "seccomp filter for " + runtime.GOARCH,
			Found: "sandboxd has syscall tables for amd64 and arm64 only", Remedy: "run sandboxd on amd64 or arm64",
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
	jeq(auditArch, 1, 0)
	ret(retKill)
	ld(offNr)
	if hasX32 {
		// x32 syscalls reach the same kernel entry points under other
		// numbers. Refused by the filter itself: no program uses them by
		// accident, and the daemon could not name them.
		p = append(p, SockFilter{Code: bpfJgeK, Jt: 0, Jf: 1, K: x32Bit})
		ret(retErrno | errEPERM)
	}

	for _, s := range deniedCalls {
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
		for _, c := range modeCalls {
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
		for _, s := range sysVIPCCalls {
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
		notified := append(append([]syscallName(nil), writeCalls...), metaCalls...)
		openFlags := uint32(openWriteFlags)
		if o.NotifyLookups {
			notified = append(notified, lookupCalls...)
			openFlags |= oPath
		}
		for _, s := range notified {
			jeq(s.nr, 0, 1)
			ret(retNotify)
		}
		// open takes its flags as the second argument, openat as the
		// third; both as ints.
		opens := presentOnly([]struct{ nr, off uint32 }{{nrOpen, offArg0 + 8}, {nrOpenat, offArg0 + 16}},
			func(c struct{ nr, off uint32 }) uint32 { return c.nr })
		for _, c := range opens {
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
