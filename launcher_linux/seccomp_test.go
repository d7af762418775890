package launcherlinux

import (
	"reflect"
	"testing"

	"github.com/sandboxd/sandboxd/internal/bpfrun"
)

// runFilter runs a classic BPF program over a struct seccomp_data, with
// only the instructions SeccompProgram emits.
func runFilter(t *testing.T, prog []SockFilter, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	v, err := bpfrun.Verdict(prog, bpfrun.Data(arch, nr, args...))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSeccompProgramNotifies(t *testing.T) {
	const (
		read, openat, socketpair = nrRead, nrOpenat, nrSocketpair
		oRdonly, oWronly, oCreat = 0, 1, 0x40
		sockDgram                = 2
		eperm                    = retErrno | errEPERM
	)
	type call struct {
		name string
		nr   uint32
		args []uint64
	}
	cases := []struct {
		opts  SeccompOptions
		calls map[uint32][]call // the answer each call gets
	}{
		{SeccompOptions{RestrictSocketFamilies: true, Notify: true, NotifyConnect: true}, map[uint32][]call{
			retAllow: {
				{"read", read, nil}, {"open read-only", nrOpen, []uint64{0, oRdonly}}, {"openat read-only", openat, []uint64{0, 0, oRdonly}},
				{"inet socket", nrSocket, []uint64{afInet, sockStream}}, {"socketpair", socketpair, []uint64{afUnix, sockStream}},
				{"clone of a thread", nrClone, []uint64{0x3d0f00}},
				// The kernel reads the flags as an int.
				{"openat with flags in the high word only", openat, []uint64{0, 0, 1 << 32}},
			},
			retNotify: {
				{"open for writing", nrOpen, []uint64{0, oWronly}}, {"openat creating", openat, []uint64{0, 0, oCreat}},
				{"mkdir", nrMkdir, nil}, {"renameat2", nrRenameat2, nil}, {"openat2", nrOpenat2, nil},
				{"ptrace", nrPtrace, nil}, {"unshare", nrUnshare, nil}, {"clone of a user namespace", nrClone, []uint64{0x10000000}},
				{"TIOCSTI", nrIoctl, []uint64{0, tiocsti}}, {"TIOCSTI with high bits", nrIoctl, []uint64{0, 1<<32 | tiocsti}},
				{"unix socket", nrSocket, []uint64{afUnix, sockStream}}, {"connect", nrConnect, nil},
			},
			retErrno | errENOSYS: {{"clone3", nrClone3, nil}},
		}},
		{SeccompOptions{RestrictSocketFamilies: true, Notify: true, NotifyConnect: true, UnixStream: true}, map[uint32][]call{
			retAllow:  {{"unix stream socket", nrSocket, []uint64{afUnix, sockStream | sockTypeFlags}}},
			retNotify: {{"unix datagram socket", nrSocket, []uint64{afUnix, sockDgram}}, {"unix stream socket, protocol 1", nrSocket, []uint64{afUnix, sockStream, 1}}},
		}},
		// Without a listener: the filter refuses by itself and notifies
		// nothing.
		{SeccompOptions{RestrictSocketFamilies: true}, map[uint32][]call{
			retAllow: {{"open for writing", nrOpen, []uint64{0, oWronly}}, {"mkdir", nrMkdir, nil}, {"connect", nrConnect, nil}},
			eperm:    {{"ptrace", nrPtrace, nil}, {"unix socket", nrSocket, []uint64{afUnix, sockStream}}, {"clone of a user namespace", nrClone, []uint64{0x10000000}}},
		}},
		// The landlock set: no network namespace, so connect is not
		// notified, but socket() is refused through the listener.
		{SeccompOptions{NoSockets: true, NoSysVIPC: true, Notify: true}, map[uint32][]call{
			retAllow: {
				{"connect", nrConnect, nil}, {"socketpair", socketpair, nil},
				// Without deny paths nothing is hidden from lookups.
				{"newfstatat", nrNewfstatat, nil}, {"readlink", nrReadlink, nil}, {"openat O_PATH", openat, []uint64{0, 0, oPath}},
				{"FS_IOC_GETFLAGS", nrIoctl, []uint64{0, 0x80086601}},
			},
			retNotify: {
				{"inet socket", nrSocket, []uint64{afInet, sockStream}}, {"shmget", nrShmget, nil}, {"creat", nrCreat, nil},
				{"chmod", nrChmod, nil}, {"fchmod", nrFchmod, nil}, {"fchmodat2", nrFchmodat2, nil}, {"fchownat", nrFchownat, nil},
				{"utimensat", nrUtimensat, nil}, {"fsetxattr", nrFsetxattr, nil}, {"removexattrat", nrRemovexattrat, nil},
				{"file_setattr", nrFileSetattr, nil},
				{"FS_IOC_SETFLAGS", nrIoctl, []uint64{0, 0x40086602}}, {"FS_IOC_SETFLAGS with high bits", nrIoctl, []uint64{0, 1<<32 | 0x40086602}},
				{"FS_IOC_FSSETXATTR", nrIoctl, []uint64{0, 0x401c5820}}, {"FS_IOC_ENABLE_VERITY", nrIoctl, []uint64{0, 0x40806685}},
			},
		}},
		// The landlock set under network none: unix stream sockets only,
		// their connects and binds the daemon's.
		{SeccompOptions{NoSockets: true, UnixStream: true, NotifyConnect: true, NotifyBind: true, Notify: true}, map[uint32][]call{
			retAllow: {{"unix stream socket", nrSocket, []uint64{afUnix, sockStream | sockTypeFlags}}, {"socketpair", socketpair, nil}},
			retNotify: {
				{"inet socket", nrSocket, []uint64{afInet, sockStream}}, {"unix datagram socket", nrSocket, []uint64{afUnix, sockDgram}},
				{"unix stream socket, protocol 1", nrSocket, []uint64{afUnix, sockStream, 1}}, {"connect", nrConnect, nil}, {"bind", nrBind, nil},
			},
		}},
		// Under network host: other families pass, unix ones but stream
		// are refused, binds are the kernel's.
		{SeccompOptions{NoUnixSockets: true, UnixStream: true, NotifyConnect: true, Notify: true}, map[uint32][]call{
			retAllow: {
				{"unix stream socket", nrSocket, []uint64{afUnix, sockStream}}, {"inet socket", nrSocket, []uint64{afInet, sockStream}},
				{"bind", nrBind, nil},
			},
			retNotify: {{"unix datagram socket", nrSocket, []uint64{afUnix, sockDgram}}, {"connect", nrConnect, nil}},
		}},
		// An ID-mapped write root: set-ID modes in registers are refused,
		// openat2 whole; other modes and opens that do not create pass.
		{SeccompOptions{NoSetID: true}, map[uint32][]call{
			retAllow: {
				{"chmod 0755", nrChmod, []uint64{0, 0o755}}, {"openat 04755 without O_CREAT", openat, []uint64{0, 0, oWronly, 0o4755}},
				{"mkdir 0755", nrMkdir, []uint64{0, 0o755}}, {"fchmod high bits only", nrFchmod, []uint64{0, 0o6000 << 32}},
			},
			eperm: {
				{"chmod 04755", nrChmod, []uint64{0, 0o4755}}, {"fchmod 02755", nrFchmod, []uint64{0, 0o2755}},
				{"fchmodat2 06755", nrFchmodat2, []uint64{0, 0, 0o6755}}, {"creat 04755", nrCreat, []uint64{0, 0o4755}},
				{"openat O_CREAT 04755", openat, []uint64{0, 0, oCreat, 0o4755}}, {"open O_TMPFILE 02755", nrOpen, []uint64{0, 0x410000 | oWronly, 0o2755}},
				{"mkdirat 02755", nrMkdirat, []uint64{0, 0, 0o2755}}, {"mknodat 04755", nrMknodat, []uint64{0, 0, 0o104755}},
			},
			retErrno | errENOSYS: {{"openat2", nrOpenat2, nil}},
		}},
		{SeccompOptions{NoSetID: true, Notify: true}, map[uint32][]call{
			retNotify: {{"chmod 04755", nrChmod, []uint64{0, 0o4755}}, {"openat2", nrOpenat2, nil}},
		}},
		// The landlock set with deny paths: every lookup by name reaches
		// the daemon, a read-only open does not.
		{SeccompOptions{NoSockets: true, NoSysVIPC: true, Notify: true, NotifyLookups: true}, map[uint32][]call{
			retAllow: {{"openat read-only", openat, []uint64{0, 0, oRdonly}}, {"read", read, nil}},
			retNotify: {
				{"stat", nrStat, nil}, {"newfstatat", nrNewfstatat, nil}, {"statx", nrStatx, nil}, {"faccessat2", nrFaccessat2, nil},
				{"readlinkat", nrReadlinkat, nil}, {"lgetxattr", nrLgetxattr, nil}, {"listxattrat", nrListxattrat, nil},
				{"chdir", nrChdir, nil}, {"inotify_add_watch", nrInotifyAddWatch, nil}, {"statfs", nrStatfs, nil},
				{"open O_PATH", nrOpen, []uint64{0, oPath}}, {"openat O_PATH", openat, []uint64{0, 0, oPath | oRdonly}},
			},
			retErrno | errENOSYS: {{"openat2", nrOpenat2, nil}},
		}},
	}
	for _, c := range cases {
		prog, err := SeccompProgram(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		for want, calls := range c.calls {
			for _, call := range calls {
				// open, stat, chmod and the other calls older than their
				// *at forms are not syscalls of arm64.
				if !present(call.nr) {
					continue
				}
				if got := runFilter(t, prog, auditArch, call.nr, call.args...); got != want {
					t.Errorf("%+v: %s gets %#x, want %#x", c.opts, call.name, got, want)
				}
			}
		}
		if got := runFilter(t, prog, 0x40000003, read); got != retKill {
			t.Errorf("%+v: another architecture gets %#x, want the kill", c.opts, got)
		}
		if got := runFilter(t, prog, auditArch, x32Bit|read); hasX32 && got != retErrno|errEPERM {
			t.Errorf("%+v: an x32 call gets %#x, want EPERM", c.opts, got)
		}
	}
}

// The kernel runs a filter at load for each syscall number, with only the
// number and the architecture, and from then on skips it for the numbers
// it allows without reading an argument (Linux 5.11,
// seccomp_is_const_allow). So every call no rule names must reach its
// allow reading nothing else, and none may walk a chain of comparisons to
// get there: the program is a search, a few steps deep.
func TestSeccompProgramIsASearch(t *testing.T) {
	named := map[uint32]bool{nrClone: true, nrClone3: true, nrIoctl: true, nrSocket: true, nrConnect: true, nrBind: true, nrOpen: true, nrOpenat: true, nrOpenat2: true}
	for _, l := range [][]syscallName{deniedCalls(), sysVIPCCalls(), writeCalls(), metaCalls(), lookupCalls()} {
		for _, s := range l {
			named[s.nr] = true
		}
	}
	for _, c := range modeCalls() {
		named[c.nr] = true
	}
	for _, o := range []SeccompOptions{
		{},
		{RestrictSocketFamilies: true, Notify: true, NotifyConnect: true, UnixStream: true},
		{RestrictSocketFamilies: true, Notify: true, NotifyConnect: true, NoSetID: true},
		{NoSockets: true, NoSysVIPC: true, Notify: true, NotifyLookups: true, UnixStream: true, NotifyConnect: true, NotifyBind: true},
	} {
		prog, err := SeccompProgram(o)
		if err != nil {
			t.Fatal(err)
		}
		depth := 4
		for n := 1; n < len(prog); n *= 2 {
			depth += 2
		}
		for nr := uint32(0); nr < 1024; nr++ {
			steps, verdict, constant := constantRun(t, prog, nr)
			if !named[nr] && (!constant || verdict != retAllow) {
				t.Errorf("%+v: syscall %d, which no rule names, is not allowed by its number alone (%#x after %d steps)", o, nr, verdict, steps)
			}
			if steps > depth {
				t.Errorf("%+v: syscall %d takes %d steps to its rules, more than a search of %d instructions (%d)", o, nr, steps, len(prog), depth)
			}
		}
	}
}

// constantRun runs prog as the kernel does at load for nr: it stops at the
// first load of an argument. steps counts the instructions before that or
// the return.
func constantRun(t *testing.T, prog []SockFilter, nr uint32) (steps int, verdict uint32, constant bool) {
	t.Helper()
	steps, verdict, constant, err := bpfrun.Constant(prog, auditArch, nr)
	if err != nil {
		t.Fatal(err)
	}
	return steps, verdict, constant
}

// compact must change the program's size and nothing it answers: every
// combination of the options, over every syscall number, x32's, another
// architecture's, and arguments that take each rule's every way, gets
// from the compacted program what it got from the search as laid out,
// and the kernel's action cache, which runs the filter with the number
// alone, learns the same of both.
func TestSeccompCompactKeepsVerdicts(t *testing.T) {
	nrs, argSets := filterInputs()
	data := map[uint32][][]byte{}
	// Every combination of the options, the planner's and the others: a
	// field added later is enumerated too.
	fields := reflect.TypeFor[SeccompOptions]().NumField()
	for bits := range 1 << fields {
		var o SeccompOptions
		v := reflect.ValueOf(&o).Elem()
		for i := range fields {
			v.Field(i).SetBool(bits&(1<<i) != 0)
		}
		laid := searchProgram(o)
		prog := compact(laid)
		if len(prog) >= len(laid) {
			t.Errorf("%+v: compacted to %d instructions from %d", o, len(prog), len(laid))
		}
		for _, nr := range nrs {
			steps, verdict, constant, err := bpfrun.Constant(laid, auditArch, nr)
			_, cverdict, cconstant, cerr := bpfrun.Constant(prog, auditArch, nr)
			if err != nil || cerr != nil {
				t.Fatalf("%+v: syscall %#x: %v, compacted %v", o, nr, err, cerr)
			}
			if constant != cconstant || verdict != cverdict {
				t.Fatalf("%+v: syscall %#x by its number alone: %#x (constant %v after %d steps), compacted %#x (constant %v)",
					o, nr, verdict, constant, steps, cverdict, cconstant)
			}
			if constant {
				continue
			}
			if data[nr] == nil {
				for _, a := range argSets {
					data[nr] = append(data[nr], bpfrun.Data(auditArch, nr, a...))
				}
			}
			for i, d := range data[nr] {
				want, err := bpfrun.Verdict(laid, d)
				got, cerr := bpfrun.Verdict(prog, d)
				if err != nil || cerr != nil || got != want {
					t.Fatalf("%+v: syscall %#x with %#x gets %#x (%v), as laid out %#x (%v)", o, nr, argSets[i], got, cerr, want, err)
				}
			}
		}
		for _, arch := range []uint32{0, 0x40000003, auditArch ^ 1, auditArch | 0x100} {
			for _, nr := range []uint32{0, nrClone, nrSocket, x32Bit} {
				if want, got := runFilter(t, laid, arch, nr), runFilter(t, prog, arch, nr); got != want {
					t.Fatalf("%+v: architecture %#x, syscall %#x gets %#x, as laid out %#x", o, arch, nr, got, want)
				}
			}
		}
	}
}

// filterInputs are the syscall numbers a filter is run for, every one a
// table has and x32's, and the arguments it is run with for a call whose
// answer depends on them.
func filterInputs() (nrs []uint32, argSets [][]uint64) {
	var arg []uint64
	arg = append(arg, 0, 1, 2, 3, 10, 16, 40, 0x3d0f00, 0x10000000, 1<<32|0x10000000, 0xffffffff, 1<<32, 1<<63)
	for bit := uint64(1); bit < 1<<32; bit <<= 1 {
		arg = append(arg, bit)
	}
	arg = append(arg, tiocsti, tioclinux, 1<<32|tiocsti, 0x80086601)
	for _, c := range inodeIoctls {
		arg = append(arg, uint64(c.cmd), 1<<32|uint64(c.cmd))
	}
	arg = append(arg, sockStream|sockTypeFlags, 2|0x800, 0o755, 0o4755, 0o2755, 0o6755, 0o104755, 0x410001, oPath|1, 0x41)
	// Every value alone in each argument the rules read, and the
	// socket() and open flag and mode combinations, which rules read
	// together.
	for i := range 4 {
		for _, v := range arg {
			a := make([]uint64, 4)
			a[i] = v
			argSets = append(argSets, a)
		}
	}
	for _, family := range []uint64{afUnix, afInet, afInet6, afNetlink, 3, 40} {
		for _, typ := range []uint64{sockStream, 2, sockStream | sockTypeFlags, 2 | 0x800, 1<<32 | sockStream} {
			for _, proto := range []uint64{0, 1, 1 << 32} {
				argSets = append(argSets, []uint64{family, typ, proto})
			}
		}
	}
	for _, flags := range []uint64{0, 1, 2, 0x40, 0x41, 0x200, 0x410001, oPath, 1 << 32} {
		for _, mode := range []uint64{0, 0o755, 0o4755, 0o2000, 0o6000 << 32} {
			argSets = append(argSets, []uint64{0, flags, mode}, []uint64{0, 0, flags, mode})
		}
	}
	nrs = []uint32{x32Bit - 1, x32Bit, x32Bit | 0xffff, 0x7fffffff, 0x80000000, 0xffffffff}
	for nr := range uint32(1100) {
		nrs = append(nrs, nr, x32Bit|nr)
	}
	return nrs, argSets
}

// A search longer than any options make, whose spans all share their
// returns, puts them out of a conditional jump's reach from most
// comparisons: compact must place copies and unconditional jumps, and
// get the distances right at every length.
func TestSeccompCompactReachesFarReturns(t *testing.T) {
	var spans []span
	for nr := range uint32(400) {
		spans = append(spans, span{nr, []SockFilter{
			{Code: bpfLdAbsW, K: offArg0}, {Code: bpfJeqK, Jf: 1, K: nr},
			{Code: bpfRetK, K: retNotify}, {Code: bpfRetK, K: retErrno | nr%3},
		}})
	}
	laid := append([]SockFilter{{Code: bpfLdAbsW, K: offNr}}, searchTree(spans)...)
	prog := compact(laid)
	if len(prog) >= len(laid) {
		t.Errorf("compacted to %d instructions from %d", len(prog), len(laid))
	}
	for nr := range uint32(402) {
		for _, arg := range []uint64{0, uint64(nr), uint64(nr) + 1} {
			if want, got := runFilter(t, laid, auditArch, nr, arg), runFilter(t, prog, auditArch, nr, arg); got != want {
				t.Fatalf("syscall %d with %d gets %#x, as laid out %#x", nr, arg, got, want)
			}
		}
	}
}
