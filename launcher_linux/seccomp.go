package launcherlinux

//go:generate sh -c "go run ./internal/sysnumgen -xsys \"$(go list -m -f {{.Dir}} golang.org/x/sys)\" -out ."

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

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
var modeCalls = sync.OnceValue(func() []modeCall {
	return presentOnly([]modeCall{
		{"chmod", nrChmod, 1, -1}, {"fchmod", nrFchmod, 1, -1}, {"fchmodat", nrFchmodat, 2, -1}, {"fchmodat2", nrFchmodat2, 2, -1},
		{"creat", nrCreat, 1, -1}, {"mkdir", nrMkdir, 1, -1}, {"mkdirat", nrMkdirat, 2, -1},
		{"mknod", nrMknod, 1, -1}, {"mknodat", nrMknodat, 2, -1},
		{"open", nrOpen, 2, 1}, {"openat", nrOpenat, 3, 2},
	}, func(c modeCall) uint32 { return c.nr })
})

// openCreates are the open flags that make a file: O_CREAT and
// __O_TMPFILE.
const openCreates = 0x40 | 0x400000

const (
	bpfLdAbsW = 0x20
	bpfJa     = 0x05
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
// TestSeccompProgramIsASearch, which builds every table.
func calls(names ...string) []syscallName {
	out := make([]syscallName, 0, len(names))
	for _, n := range names {
		nr, ok := sysnum(n)
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
var deniedCalls = sync.OnceValue(func() []syscallName {
	return calls(
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
})

// sysVIPCCalls are SysV IPC and POSIX message queue syscalls.
var sysVIPCCalls = sync.OnceValue(func() []syscallName {
	return calls(
		"shmget", "shmat", "shmctl", "semget", "semop", "semctl", "shmdt", "msgget", "msgsnd", "msgrcv",
		"msgctl", "semtimedop", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
		"mq_getsetattr",
	)
})

// writeCalls are the filesystem calls that create, change or remove a
// name, besides open and openat, which are notified only when their flags
// ask to write: a read-only open, the commonest call there is, never
// waits for the daemon.
var writeCalls = sync.OnceValue(func() []syscallName {
	return calls(
		"creat", "truncate", "mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir",
		"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "openat2",
	)
})

// metaCalls change an inode's mode, owner, times or extended
// attributes. Landlock governs none of them.
var metaCalls = sync.OnceValue(func() []syscallName {
	return calls(
		"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
		"utimes", "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
		"lremovexattr", "fremovexattr", "setxattrat", "removexattrat", "file_setattr",
	)
})

// lookupCalls read what a name names, or make it the working
// directory or a watch, without opening it for reading: Landlock checks
// none of them.
var lookupCalls = sync.OnceValue(func() []syscallName {
	return calls(
		"stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", "readlink",
		"readlinkat", "getxattr", "lgetxattr", "listxattr", "llistxattr", "getxattrat", "listxattrat",
		"file_getattr", "statfs", "chdir", "inotify_add_watch",
	)
})

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

// fragment is one rule's instructions for one syscall, run with its number
// known: jumps to just past its end fall through to the next rule for that
// syscall, and after the last one the call is allowed.
type fragment struct {
	insns []SockFilter
	// final: every path through it returns; no later rule for the call
	// is reached.
	final bool
}

// SeccompProgram builds the filter the sandboxed command runs under.
//
// Its shape is for the kernel's cost, its verdicts those of the rules
// below, in their order: after the architecture check, a binary search on
// the syscall number leads to the rules for that number alone. The kernel
// runs every filter at load for each syscall number to learn which it
// allows whatever the arguments, and then skips the filter for those
// (Linux 5.11): a chain of a few hundred comparisons cost each load about
// as much as the rest of the command's setup, and every call not cached
// walked it.
//
// A program depends on its options alone: each is built once and shared by
// every plan that has those options, clipped so that an append copies it.
func SeccompProgram(o SeccompOptions) ([]SockFilter, error) {
	if seccompArch != runtime.GOARCH {
		return nil, &launcher.Unenforceable{
			Field: "process", Mechanism: "seccomp filter for " + runtime.GOARCH,
			Found: "sandboxd has syscall tables for amd64 and arm64 only", Remedy: "run sandboxd on amd64 or arm64",
		}
	}
	if p, ok := seccompPrograms.Load(o); ok {
		return p.([]SockFilter), nil
	}
	p, err := buildSeccompProgram(o)
	if err != nil {
		return nil, err
	}
	p = slices.Clip(p)
	seccompPrograms.Store(o, p)
	return p, nil
}

// seccompPrograms holds the programs built, by their SeccompOptions.
var seccompPrograms sync.Map

func buildSeccompProgram(o SeccompOptions) ([]SockFilter, error) {
	p := compact(searchProgram(o))
	if len(p) > 4096 {
		return nil, fmt.Errorf("seccomp program has %d instructions, the kernel takes 4096", len(p))
	}
	return p, nil
}

// searchProgram is the filter for o as the search lays it out, each span
// with its own instructions.
func searchProgram(o SeccompOptions) []SockFilter {
	rules := map[uint32][]fragment{}
	add := func(nr uint32, final bool, insns ...SockFilter) {
		if fs := rules[nr]; len(fs) > 0 && fs[len(fs)-1].final {
			// An earlier rule answers every such call.
			return
		}
		rules[nr] = append(rules[nr], fragment{insns: insns, final: final})
	}
	ld := func(off uint32) SockFilter { return SockFilter{Code: bpfLdAbsW, K: off} }
	jeq := func(k uint32, jt, jf uint8) SockFilter { return SockFilter{Code: bpfJeqK, Jt: jt, Jf: jf, K: k} }
	jset := func(k uint32, jt, jf uint8) SockFilter { return SockFilter{Code: bpfJsetK, Jt: jt, Jf: jf, K: k} }
	and := func(k uint32) SockFilter { return SockFilter{Code: bpfAndK, K: k} }
	ret := func(k uint32) SockFilter { return SockFilter{Code: bpfRetK, K: k} }
	// What the policy refuses: the daemon answers EPERM when it holds the
	// listener, the filter itself when there is none.
	deny := uint32(retErrno | errEPERM)
	if o.Notify {
		deny = retNotify
	}

	for _, s := range deniedCalls() {
		add(s.nr, true, ret(deny))
	}
	// clone3 passes its flags in memory the filter cannot read; ENOSYS makes
	// libc fall back to clone, whose flags it can. Not a refusal of the
	// policy, so never notified.
	add(nrClone3, true, ret(retErrno|errENOSYS))
	add(nrClone, false, ld(offArg0), jset(cloneNewFlags, 0, 1), ret(deny))

	// TIOCSTI and TIOCLINUX push input into a terminal. The kernel reads the
	// command as 32 bits, so compare only the low word: that also catches
	// the variant with high bits set.
	ioctl := []SockFilter{ld(offArg0 + 8)}
	for _, c := range []uint32{tiocsti, tioclinux} {
		ioctl = append(ioctl, jeq(c, 0, 1), ret(deny))
	}
	if o.Notify {
		for _, c := range inodeIoctls {
			ioctl = append(ioctl, jeq(c.cmd, 0, 1), ret(retNotify))
		}
	}
	add(nrIoctl, true, append(ioctl, ret(retAllow))...)

	if o.NoSetID {
		refuse := uint32(retErrno | errEPERM)
		refuseOpenat2 := uint32(retErrno | errENOSYS)
		if o.Notify {
			refuse, refuseOpenat2 = retNotify, retNotify
		}
		for _, c := range modeCalls() {
			mode := []SockFilter{ld(offArg0 + 8*uint32(c.modeArg)), jset(setIDBits, 0, 1), ret(refuse)}
			if c.flagsArg >= 0 {
				mode = append([]SockFilter{ld(offArg0 + 8*uint32(c.flagsArg)), jset(openCreates, 0, 3)}, mode...)
			}
			add(c.nr, false, mode...)
		}
		add(nrOpenat2, true, ret(refuseOpenat2))
	}
	if o.NotifyLookups {
		add(nrOpenat2, true, ret(retErrno|errENOSYS))
	}
	if o.NoSysVIPC {
		for _, s := range sysVIPCCalls() {
			add(s.nr, true, ret(deny))
		}
	}
	switch {
	case o.UnixStream && (o.NoSockets || o.NoUnixSockets):
		// socket(AF_UNIX, SOCK_STREAM, 0) is allowed; the other unix
		// types are refused, and the other families as NoSockets or
		// NoUnixSockets say.
		other := uint32(retAllow)
		if o.NoSockets {
			other = deny
		}
		add(nrSocket, true,
			ld(offArg0), jeq(afUnix, 0, 7),
			ld(offArg0+8), and(^uint32(sockTypeFlags)), jeq(sockStream, 0, 3),
			ld(offArg0+16), jeq(0, 0, 1),
			ret(retAllow), ret(deny), ret(other))
	case o.NoSockets:
		add(nrSocket, true, ret(deny))
	case o.NoUnixSockets:
		add(nrSocket, false, ld(offArg0), jeq(afUnix, 0, 1), ret(deny))
	}
	switch {
	case o.RestrictSocketFamilies && o.UnixStream:
		// The kernel reads type and protocol as ints: the low words are
		// all it acts on.
		add(nrSocket, false,
			ld(offArg0), jeq(afInet, 9, 0), jeq(afInet6, 8, 0), jeq(afNetlink, 7, 0), jeq(afUnix, 0, 5),
			ld(offArg0+8), and(^uint32(sockTypeFlags)), jeq(sockStream, 0, 2),
			ld(offArg0+16), jeq(0, 1, 0),
			ret(deny))
	case o.RestrictSocketFamilies:
		add(nrSocket, false, ld(offArg0), jeq(afInet, 3, 0), jeq(afInet6, 2, 0), jeq(afNetlink, 1, 0), ret(deny))
	}
	if o.NotifyConnect {
		add(nrConnect, true, ret(retNotify))
	}
	if o.NotifyBind {
		add(nrBind, true, ret(retNotify))
	}
	if o.Notify {
		notified := append(append([]syscallName(nil), writeCalls()...), metaCalls()...)
		openFlags := uint32(openWriteFlags)
		if o.NotifyLookups {
			notified = append(notified, lookupCalls()...)
			openFlags |= oPath
		}
		for _, s := range notified {
			add(s.nr, true, ret(retNotify))
		}
		// open takes its flags as the second argument, openat as the
		// third; both as ints.
		opens := presentOnly([]struct{ nr, off uint32 }{{nrOpen, offArg0 + 8}, {nrOpenat, offArg0 + 16}},
			func(c struct{ nr, off uint32 }) uint32 { return c.nr })
		for _, c := range opens {
			add(c.nr, true, ld(c.off), jset(openFlags, 0, 1), ret(retNotify), ret(retAllow))
		}
	}

	// The calls of each number, in ranges of numbers that get the same
	// answer: the numbers no rule names are allowed.
	nrs := make([]uint32, 0, len(rules))
	for nr := range rules {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	allow := []SockFilter{ret(retAllow)}
	var spans []span
	extend := func(from uint32, body []SockFilter) {
		if n := len(spans); n > 0 && spans[n-1].from == from {
			spans = spans[:n-1]
		}
		if n := len(spans); n == 0 || !slices.Equal(spans[n-1].body, body) {
			spans = append(spans, span{from, body})
		}
	}
	extend(0, allow)
	for _, nr := range nrs {
		var body []SockFilter
		final := false
		for _, f := range rules[nr] {
			body = append(body, f.insns...)
			final = f.final
		}
		if !final {
			body = append(body, ret(retAllow))
		}
		extend(nr, body)
		extend(nr+1, allow)
	}
	if hasX32 {
		// x32 syscalls reach the same kernel entry points under other
		// numbers. Refused by the filter itself: no program uses them by
		// accident, and the daemon could not name them.
		extend(x32Bit, []SockFilter{ret(retErrno | errEPERM)})
	}
	return append([]SockFilter{ld(offArch), jeq(auditArch, 1, 0), ret(retKill), ld(offNr)}, searchTree(spans)...)
}

// span is a range of syscall numbers, from its own up to the next span's,
// and the rules of every call in it.
type span struct {
	from uint32
	body []SockFilter
}

// searchTree is the binary search for the syscall number, in the
// accumulator, among spans, each leading to its rules. A comparison falls
// into the lower half or jumps over it to the upper; a conditional jump
// reaches 255 instructions at most, so over a longer lower half it reaches
// an unconditional jump, which takes any distance.
func searchTree(spans []span) []SockFilter {
	if len(spans) == 1 {
		return spans[0].body
	}
	mid := len(spans) / 2
	lower, upper := searchTree(spans[:mid]), searchTree(spans[mid:])
	branch := []SockFilter{{Code: bpfJgeK, Jt: uint8(len(lower)), K: spans[mid].from}}
	if len(lower) > 255 {
		branch = []SockFilter{{Code: bpfJgeK, Jf: 1, K: spans[mid].from}, {Code: bpfJa, K: uint32(len(lower))}}
	}
	return slices.Concat(branch, lower, upper)
}

// compact is prog with every instruction it repeats written once: the
// kernel keeps a copy of the program, its translation and its JIT image
// for each sandbox, and the search above repeats the same few returns
// (and, for calls with the same rules, the same bodies) in every span.
// Identical instructions with identical successors are one node of a
// graph; the graph is laid out again with each node before its
// successors, forward jumps being all classic BPF has. Where a
// conditional jump cannot reach a shared node (255 instructions), it
// reaches a copy of a return or an unconditional jump to the node,
// placed within reach and shared in turn by what precedes it.
func compact(prog []SockFilter) []SockFilter {
	type node struct {
		code uint16
		k    uint32
		// jt is the successor of a load or an AND, the one where a
		// conditional jump goes when its condition holds; jf where it
		// goes when not. -1: none.
		jt, jf int
	}
	var nodes []node
	ids := map[node]int{}
	intern := func(n node) int {
		if id, ok := ids[n]; ok {
			return id
		}
		ids[n] = len(nodes)
		nodes = append(nodes, n)
		return len(nodes) - 1
	}
	at := make(map[int]int, len(prog))
	var nodeAt func(pc int) int
	nodeAt = func(pc int) int {
		if id, ok := at[pc]; ok {
			return id
		}
		f := prog[pc]
		var id int
		switch f.Code {
		case bpfRetK:
			id = intern(node{f.Code, f.K, -1, -1})
		case bpfJa:
			id = nodeAt(pc + 1 + int(f.K))
		case bpfJeqK, bpfJgeK, bpfJsetK:
			jt, jf := nodeAt(pc+1+int(f.Jt)), nodeAt(pc+1+int(f.Jf))
			if id = jt; jt != jf {
				id = intern(node{f.Code, f.K, jt, jf})
			}
		case bpfLdAbsW, bpfAndK:
			id = intern(node{f.Code, f.K, nodeAt(pc + 1), -1})
		default:
			// Any other code (one that jumps, reads X or returns A) would
			// lose its meaning as a node that falls through.
			panic(fmt.Sprintf("seccomp compact: instruction code %#x is not one it knows", f.Code))
		}
		at[pc] = id
		return id
	}
	root := nodeAt(0)

	// Depth first from the root, the jump taken before the one not: in
	// reverse post-order the lower half of a search follows its
	// comparison, as it did, and the returns the halves share come last.
	var order []int
	seen := make([]bool, len(nodes))
	var visit func(id int)
	visit = func(id int) {
		seen[id] = true
		for _, s := range []int{nodes[id].jt, nodes[id].jf} {
			if s >= 0 && !seen[s] {
				visit(s)
			}
		}
		order = append(order, id)
	}
	visit(root)

	// Laid out from the end: out is the program reversed, and nearest
	// holds for each node the last place in out (the nearest to what is
	// placed next) that jumping to does what the node does.
	var out []SockFilter
	nearest := make([]int, len(nodes))
	dist := func(id int) int { return len(out) - nearest[id] - 1 }
	reach := func(id, limit int) {
		if dist(id) <= limit {
			return
		}
		if n := nodes[id]; n.code == bpfRetK {
			out = append(out, SockFilter{Code: bpfRetK, K: n.k})
		} else {
			out = append(out, SockFilter{Code: bpfJa, K: uint32(dist(id))})
		}
		nearest[id] = len(out) - 1
	}
	for _, id := range order {
		n := nodes[id]
		switch n.code {
		case bpfRetK:
			out = append(out, SockFilter{Code: n.code, K: n.k})
		case bpfJeqK, bpfJgeK, bpfJsetK:
			// A copy placed for one target moves the other one further.
			for dist(n.jt) > 255 || dist(n.jf) > 255 {
				reach(n.jt, 255)
				reach(n.jf, 255)
			}
			out = append(out, SockFilter{Code: n.code, Jt: uint8(dist(n.jt)), Jf: uint8(dist(n.jf)), K: n.k})
		default:
			reach(n.jt, 0)
			out = append(out, SockFilter{Code: n.code, K: n.k})
		}
		nearest[id] = len(out) - 1
	}
	slices.Reverse(out)
	return out
}
