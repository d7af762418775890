package launcherlinux

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/fdwait"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Where the host has seccomp user notification, the command's filter
// hands three kinds of call to the daemon (SECCOMP_RET_USER_NOTIF), which
// answers them here:
//
//   - what the policy refuses outright: the daemon answers EPERM, always,
//     and records the refusal. A daemon that is slow only delays the
//     answer; one that is gone leaves the call failing with ENOSYS.
//   - connect() in a private network namespace: the daemon performs it
//     (connect_linux.go) and records what the namespace refused.
//   - calls that may write a name: the daemon judges them against the
//     plan's model of the filesystem (fswrite_linux.go), records a
//     refusal, and lets the kernel carry the call out
//     (SECCOMP_USER_NOTIF_FLAG_CONTINUE). That is safe exactly because the
//     decision is not the daemon's: the mounts and Landlock make it, and
//     the sandbox changing its arguments after the daemon looked changes
//     only what is recorded.

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

// seccompData is struct seccomp_data.
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// maxConnectsInFlight bounds the connects performed at once for one
// sandbox: a blocking connect holds one of the daemon's threads until it
// completes, and a sandbox must not exhaust them.
const maxConnectsInFlight = 64

// errSandboxGone ends the receive loop: no task uses the filter any more.
var errSandboxGone = errors.New("no process left under the seccomp filter")

// supervisor answers the notifications of one sandbox's seccomp listener.
type supervisor struct {
	// listener enters the runtime's poller with its first notification
	// (fdwait.Lazy): a quiet listener waits in the shared waiter only.
	listener *fdwait.Lazy
	rc       syscall.RawConn
	// connect says the daemon performs connect(); hostSocket is where
	// SessionSocketPath leads, "" when the sandbox has no session socket.
	connect    bool
	hostSocket string
	// writes judges write-intent calls, whose names are resolved from
	// root, an fd of the sandbox's root directory.
	writes *WriteModel
	root   int
	// emulate says the daemon performs metadata calls in the sandbox's
	// place (fsmeta_linux.go), and lookups that it performs lookups too.
	emulate, lookups bool
	// noSetID refuses set-ID modes and openat2 (SeccompOptions.NoSetID).
	noSetID bool
	// diag is a NETLINK_SOCK_DIAG socket of the sandbox's network
	// namespace (sandboxinit.PassDiag), -1 without one; openDiag, when
	// not nil, makes it at the first need. diagMu guards both and keeps
	// the socket's requests and answers from interleaving.
	diag     int
	openDiag func() (int, error)
	diagMu   sync.Mutex
	// sharedNetNS: diag is of the host's network namespace, which the
	// sandbox shares, so a listener is the sandbox's own only when a
	// descendant of init, the sandbox's init, holds it
	// (Supervision.SharedNetNS).
	sharedNetNS bool
	init        int
	// onDenial records a refusal; nil when nobody asked.
	onDenial func(*sandboxdv1.Denial)

	// connectSlots bounds the connects answered at once and done is
	// closed by stop; both are made, under mu, by the first connect, as
	// a sandbox that never connects (most idle ones) needs neither and
	// each is an allocation of the session's life.
	connectSlots chan struct{}
	done         chan struct{}
	// drained, made by stop, is closed once the supervision is stopped
	// and nothing of it runs: not the receive loop, no connect being
	// answered.
	drained chan struct{}

	// idle hands the listener between the receive loop and the shared
	// waiter, where a quiet listener waits without a goroutine.
	idle fdwait.Idle

	mu      sync.Mutex
	stopped bool
	// inFlight, made by the first track, holds the duplicates a connect
	// is under for stop to abort.
	inFlight map[int]bool
	// running counts the receive loop and the connects being answered.
	// A counter rather than a WaitGroup: stop would need a goroutine to
	// wait for one while it aborts connects, and starting it (and a
	// thread to run it) was most of what stopping cost.
	running int
}

// supervise takes over listener, the seccomp listener the init sent for
// a sandbox planned with sv, and root, an fd of the sandbox's root
// directory, and answers the listener's notifications until stop. diag is
// the sandbox's sock_diag socket, or -1 with openDiag to make it when
// first needed (or with neither: no way to tell a listener's owner).
func supervise(listener, root, diag int, openDiag func() (int, error), init int, sv *Supervision, writes *WriteModel, hostSocket string, onDenial func(*sandboxdv1.Denial)) (*supervisor, error) {
	// Non-blocking so that the runtime's poller waits for notifications and
	// closing the file ends the wait; the ioctls ignore the flag.
	if err := unix.SetNonblock(listener, true); err != nil {
		unix.Close(listener)
		unix.Close(root)
		closeIfOpen(diag)
		return nil, fmt.Errorf("seccomp listener: %w", err)
	}
	s := &supervisor{
		listener:    fdwait.NewLazy(listener, "seccomp-listener"),
		connect:     sv.Connect,
		hostSocket:  hostSocket,
		writes:      writes,
		root:        root,
		diag:        diag,
		openDiag:    openDiag,
		sharedNetNS: sv.SharedNetNS,
		init:        init,
		onDenial:    onDenial,
		emulate:     sv.Emulate != nil,
		lookups:     sv.Emulate != nil && sv.Emulate.Lookups,
		noSetID:     sv.NoSetID,
		// The receive loop.
		running: 1,
	}
	rc, err := s.listener.SyscallConn()
	if err != nil {
		s.listener.Close()
		unix.Close(root)
		closeIfOpen(diag)
		return nil, fmt.Errorf("seccomp listener: %w", err)
	}
	s.rc = rc
	s.idle.Init(s.listener, notifyLinger, s.lingering)
	// Wake each side on the CPU the other ran on: the round trip is the
	// cost of every notified call (Linux 6.6; older kernels refuse the
	// flag and wake the usual way).
	unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	if sv.Emulate == nil {
		if !s.idle.Rest() {
			go s.receive(false)
		}
		return s, nil
	}
	ready := make(chan error, 1)
	go func() {
		// The thread that performs the sandbox's calls must hold no more
		// than the sandbox does, for as long as the loop runs: it keeps
		// its goroutine and thread throughout.
		runtime.LockOSThread()
		restore, err := restrictThread(sv.Emulate.UID, sv.Emulate.GID)
		if err != nil {
			s.exit()
			ready <- err
			runtime.UnlockOSThread()
			return
		}
		defer func() {
			if err := restore(); err != nil {
				// Neither back to the runtime with the sandbox's
				// credentials, nor ended (which would kill the inits it
				// forked): parked for good.
				select {}
			}
			runtime.UnlockOSThread()
		}()
		ready <- nil
		s.receive(false)
	}()
	if err := <-ready; err != nil {
		s.listener.Close()
		unix.Close(root)
		closeIfOpen(diag)
		return nil, fmt.Errorf("seccomp supervisor thread: %w", err)
	}
	return s, nil
}

// stop ends the supervision once the sandbox is gone: it aborts connects
// still in progress (an inet connect waiting for an answer that cannot come
// now) and waits for every answer to finish, so that no refusal is
// recorded after it returns. A connect to the session socket waits until
// the daemon accepts it or closes that socket.
func (s *supervisor) stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		s.drained = make(chan struct{})
		if s.done != nil {
			close(s.done)
		}
		if s.idle.Stop() {
			// The receive loop ends here, without having run again.
			s.running--
		}
		if s.running == 0 {
			close(s.drained)
		}
	}
	s.mu.Unlock()
	s.idle.Done()
	s.listener.Close()
	// A shutdown before a connect has begun does nothing, and a connect
	// registered just now may not have: shut down again until every
	// connect in flight has returned.
	for {
		s.mu.Lock()
		for fd := range s.inFlight {
			unix.Shutdown(fd, unix.SHUT_RDWR)
		}
		drained := s.drained
		s.mu.Unlock()
		select {
		case <-drained:
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	unix.Close(s.root)
	s.diagMu.Lock()
	closeIfOpen(s.diag)
	s.diag, s.openDiag = -1, nil
	s.diagMu.Unlock()
}

func closeIfOpen(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// enter counts one more connect being answered; only the receive loop,
// itself counted, calls it, so drained is not closed yet.
func (s *supervisor) enter() {
	s.mu.Lock()
	s.running++
	s.mu.Unlock()
}

// exit uncounts the receive loop or a connect answered.
func (s *supervisor) exit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running--; s.running == 0 && s.stopped {
		close(s.drained)
	}
}

// notifyLinger is how long the receive loop waits for the next
// notification before it gives its goroutine back and the listener waits
// in the shared waiter (fdwait) without one: a sandbox busy with notified
// calls keeps its loop running, an idle one holds no goroutine.
const notifyLinger = 250 * time.Millisecond

func (s *supervisor) lingering() { s.receive(true) }

// receive answers notifications until the sandbox is gone or stop, or,
// with linger, until none has come for notifyLinger and the waiter takes
// the listener back.
func (s *supervisor) receive(linger bool) {
	linger = linger && s.idle.Linger()
	for {
		rest, ok := s.receiveOne(&linger)
		if rest {
			return
		}
		if !ok {
			break
		}
	}
	// Whatever ends the loop, nothing answers afterwards: with the
	// listener closed, a call still waiting fails (ENOSYS) instead of
	// waiting forever.
	s.idle.Done()
	s.listener.Close()
	s.exit()
}

// receiveOne receives and answers one notification; rest says the loop
// has handed the listener back to the waiter, !ok that it has ended.
func (s *supervisor) receiveOne(linger *bool) (rest, ok bool) {
	var n seccompNotif
	var recvErr error
	err := s.rc.Read(func(fd uintptr) bool {
		// SECCOMP_IOCTL_NOTIF_RECV blocks whatever the file's flags;
		// it is called only once a notification is pending.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(pfd, 0)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.EINTR) {
				recvErr = fmt.Errorf("poll seccomp listener: %w", err)
				return true
			}
		}
		switch {
		case pfd[0].Revents&unix.POLLIN != 0:
			recvErr = ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n))
			return true
		case pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0:
			recvErr = errSandboxGone
			return true
		}
		return false
	})
	switch {
	case *linger && errors.Is(err, os.ErrDeadlineExceeded):
		rest, *linger = s.idle.Quiet()
		return rest, true
	case err != nil, errors.Is(recvErr, errSandboxGone):
		return false, false
	case errors.Is(recvErr, unix.ENOENT), errors.Is(recvErr, unix.EINTR):
		// The target died (or was interrupted) before its
		// notification could be received.
		return false, true
	case recvErr != nil:
		return false, false
	}
	at := time.Now()
	if *linger {
		s.idle.Active()
	}
	if n.Data.Nr != nrConnect {
		// Answered at once, on this thread: refusals and the
		// judgement of a write take microseconds, and a goroutine
		// would add its scheduling to every write-intent call.
		s.answer(n, at)
		return false, true
	}
	// A connect may block as long as the sandbox makes it: it gets a
	// goroutine of its own, within a bound.
	slots, done := s.connectChans()
	select {
	case slots <- struct{}{}:
	case <-done:
		return false, false
	}
	s.enter()
	go func() {
		defer s.exit()
		defer func() { <-slots }()
		s.answer(n, at)
	}()
	return false, true
}

// connectChans returns connectSlots and done, which it makes at the
// first connect; done is closed already when stop came first.
func (s *supervisor) connectChans() (slots, done chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connectSlots == nil {
		s.connectSlots, s.done = make(chan struct{}, maxConnectsInFlight), make(chan struct{})
		if s.stopped {
			close(s.done)
		}
	}
	return s.connectSlots, s.done
}

// answer answers notification n, received at at, and records the refusal
// it was, if any, once the target has the answer.
func (s *supervisor) answer(n seccompNotif, at time.Time) {
	resp := seccompNotifResp{ID: n.ID}
	var d *sandboxdv1.Denial
	addfd := -1
	var addfdFlags uint32
	fc, isFs := s.fsCall(&n)
	var xattr string
	if s.noSetID {
		xattr = s.privilegedXattr(&n)
	}
	switch {
	case n.Data.Arch != auditArch:
		resp.Error = -int32(unix.ENOSYS)
	case n.Data.Nr == nrConnect && s.connect:
		var errno syscall.Errno
		errno, d = s.emulateConnect(n)
		resp.Error = -int32(errno)
	case n.Data.Nr == nrBind && s.sharedNetNS:
		var errno syscall.Errno
		var cont bool
		errno, cont, d = s.emulateBind(n)
		if cont {
			resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		} else {
			resp.Error = -int32(errno)
		}
	case s.noSetID && setIDCall(n.Data) != "":
		var errno syscall.Errno
		errno, d = s.refuseSetID(&n)
		resp.Error = -int32(errno)
	case xattr != "":
		var errno syscall.Errno
		errno, d = s.refusePrivilegedXattr(&n, xattr)
		resp.Error = -int32(errno)
	case isFs && s.emulate:
		a := s.emulateFs(&n, fc)
		switch {
		case a.cont:
			resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		case a.hasFd:
			addfd = a.addfd
			if a.cloexec {
				addfdFlags = unix.O_CLOEXEC
			}
		default:
			resp.Val, resp.Error = a.val, -int32(a.errno)
		}
		d = a.denial
	case isFs:
		// The mounts decide; the daemon only looks, and only when
		// someone wants the record.
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		if s.onDenial != nil {
			d = s.judgeMeta(&n)
		}
	case writeCallNames()[n.Data.Nr] != "":
		// The kernel decides; the daemon only looks, and only when
		// someone wants the record. A name beneath a deny path is
		// refused here, where no mask hides it: the kernel would tell
		// it exists (EEXIST) before Landlock refuses.
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		if s.onDenial != nil || s.lookups {
			var denied bool
			if d, denied = s.judgeWrite(&n); denied {
				resp.Flags, resp.Error = 0, -int32(unix.EACCES)
			}
		}
	default:
		if d = refusedCall(n.Data); d != nil {
			resp.Error = -int32(unix.EPERM)
		} else {
			resp.Error = -int32(unix.ENOSYS)
		}
	}
	if d != nil && s.onDenial != nil && !s.identify(d, n) {
		d = nil
	}
	var sendErr error
	// Fails when the target has died meanwhile (ENOENT) or the listener
	// is closed: nobody waits for the answer then, and nothing was
	// refused.
	if err := s.rc.Control(func(fd uintptr) {
		if addfd >= 0 {
			sendErr = sendAddfd(fd, n.ID, addfd, addfdFlags)
			unix.Close(addfd)
			if sendErr == nil || errors.Is(sendErr, unix.ENOENT) {
				return
			}
			resp.Error = -int32(errnoOrEPERM(sendErr))
		}
		sendErr = ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
	}); err != nil || sendErr != nil || d == nil || s.onDenial == nil {
		return
	}
	d.Time = timestamppb.New(at)
	s.onDenial(d)
}

// identify fills in who made the call of n; false when that cannot be
// told for sure: the target is gone, and its thread id may name another
// process now.
func (s *supervisor) identify(d *sandboxdv1.Denial, n seccompNotif) bool {
	st, err := readTaskStatus(int(n.Pid))
	if err != nil {
		return false
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(st.tgid) + "/comm")
	if err != nil {
		return false
	}
	// Still pending means the target was alive throughout: what was read
	// under its thread id is its own.
	if !notificationValid(s.rc, n.ID) {
		return false
	}
	d.Pid, d.HostPid, d.Command = int32(st.nsTgid), int32(st.tgid), strings.TrimSuffix(string(comm), "\n")
	return true
}

// taskStatus is what /proc/TID/status says of a thread's process.
type taskStatus struct {
	// tgid is the process's id on the host (in the daemon's pid
	// namespace), nsTgid as the sandbox sees it, and nsTid the thread's.
	tgid, nsTgid, nsTid int
}

func readTaskStatus(tid int) (taskStatus, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return taskStatus{}, err
	}
	defer f.Close()
	var st taskStatus
	last := func(v string) (int, error) {
		fs := strings.Fields(v)
		if len(fs) == 0 {
			return 0, fmt.Errorf("/proc/%d/status: empty %q", tid, v)
		}
		return strconv.Atoi(fs[len(fs)-1])
	}
	var seen int
	sc := bufio.NewScanner(f)
	for sc.Scan() && seen < 3 {
		k, v, _ := strings.Cut(sc.Text(), ":")
		var p *int
		switch k {
		case "Tgid":
			p = &st.tgid
		case "NStgid":
			p = &st.nsTgid
		case "NSpid":
			p = &st.nsTid
		default:
			continue
		}
		if *p, err = last(v); err != nil {
			return st, err
		}
		seen++
	}
	if seen < 3 {
		return st, fmt.Errorf("/proc/%d/status: no Tgid, NStgid or NSpid", tid)
	}
	return st, nil
}

// refusedCall is the record of a call the filter notifies only to refuse it,
// nil for a call it should not have notified.
func refusedCall(data seccompData) *sandboxdv1.Denial {
	nr := uint32(data.Nr)
	a := data.Args
	d := &sandboxdv1.Denial{Field: "process", Operation: refusedNames()[nr], Errno: "EPERM"}
	switch nr {
	case nrClone, nrUnshare:
		d.Target = cloneFlagNames(a[0])
	case nrSetns:
		d.Target = cloneFlagNames(a[1])
	case nrIoctl:
		d.Target = map[uint32]string{tiocsti: "TIOCSTI", tioclinux: "TIOCLINUX"}[uint32(a[1])]
	case nrPtrace:
		d.Target = ptraceRequests[a[0]]
	case nrSocket:
		d.Field, d.Target = "network.mode", socketTarget(a[0], a[1], a[2])
	}
	if d.Operation == "" {
		return nil
	}
	return d
}

// refusedNames names every syscall the filter may refuse through the
// listener.
var refusedNames = sync.OnceValue(func() map[uint32]string {
	m := map[uint32]string{nrClone: "clone", nrIoctl: "ioctl", nrSocket: "socket"}
	for _, s := range append(append([]syscallName(nil), deniedCalls()...), sysVIPCCalls()...) {
		m[s.nr] = s.name
	}
	return m
})

// writeCallNames names the write-intent calls the filter notifies.
var writeCallNames = sync.OnceValue(func() map[int32]string {
	m := map[int32]string{nrOpen: "open", nrOpenat: "openat"}
	for _, s := range writeCalls() {
		m[int32(s.nr)] = s.name
	}
	return m
})

var cloneFlags = []struct {
	flag uint64
	name string
}{
	{unix.CLONE_NEWNS, "CLONE_NEWNS"}, {unix.CLONE_NEWCGROUP, "CLONE_NEWCGROUP"}, {unix.CLONE_NEWUTS, "CLONE_NEWUTS"},
	{unix.CLONE_NEWIPC, "CLONE_NEWIPC"}, {unix.CLONE_NEWUSER, "CLONE_NEWUSER"}, {unix.CLONE_NEWPID, "CLONE_NEWPID"},
	{unix.CLONE_NEWNET, "CLONE_NEWNET"}, {unix.CLONE_NEWTIME, "CLONE_NEWTIME"},
}

// cloneFlagNames names the namespace flags among flags, which is what the
// policy refuses of them.
func cloneFlagNames(flags uint64) string {
	var names []string
	for _, f := range cloneFlags {
		if flags&f.flag != 0 {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, "|")
}

var ptraceRequests = map[uint64]string{
	unix.PTRACE_TRACEME: "PTRACE_TRACEME", unix.PTRACE_ATTACH: "PTRACE_ATTACH", unix.PTRACE_SEIZE: "PTRACE_SEIZE",
}

var socketFamilies = map[uint32]string{
	unix.AF_UNIX: "AF_UNIX", unix.AF_INET: "AF_INET", unix.AF_INET6: "AF_INET6", unix.AF_NETLINK: "AF_NETLINK",
	unix.AF_PACKET: "AF_PACKET", unix.AF_VSOCK: "AF_VSOCK", unix.AF_ALG: "AF_ALG", unix.AF_KEY: "AF_KEY",
	unix.AF_BLUETOOTH: "AF_BLUETOOTH", unix.AF_CAN: "AF_CAN", unix.AF_TIPC: "AF_TIPC", unix.AF_XDP: "AF_XDP",
	unix.AF_RDS: "AF_RDS", unix.AF_QIPCRTR: "AF_QIPCRTR", unix.AF_APPLETALK: "AF_APPLETALK", unix.AF_X25: "AF_X25",
}

var socketTypes = map[uint32]string{
	unix.SOCK_STREAM: "SOCK_STREAM", unix.SOCK_DGRAM: "SOCK_DGRAM", unix.SOCK_RAW: "SOCK_RAW",
	unix.SOCK_SEQPACKET: "SOCK_SEQPACKET", unix.SOCK_RDM: "SOCK_RDM", unix.SOCK_PACKET: "SOCK_PACKET",
}

// socketTarget names what socket() was asked for: the family, and for a
// unix socket, whose family may be allowed where its type is not, the
// type and a protocol other than 0.
func socketTarget(family, typ, proto uint64) string {
	f := socketFamilies[uint32(family)]
	if f == "" {
		f = "family " + strconv.FormatUint(uint64(uint32(family)), 10)
	}
	if uint32(family) != unix.AF_UNIX {
		return f
	}
	t := socketTypes[uint32(typ)&^sockTypeFlags]
	if t == "" {
		t = "type " + strconv.FormatUint(uint64(uint32(typ)&^sockTypeFlags), 10)
	}
	f += " " + t
	if p := uint32(proto); p != 0 {
		f += " protocol " + strconv.FormatUint(uint64(p), 10)
	}
	return f
}

func notificationValid(rc syscall.RawConn, id uint64) bool {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id))
	}); cerr != nil {
		return false
	}
	return err == nil
}

// targetPidfd opens the thread that made the call: its fd table is the one
// the call's fd number refers to.
func targetPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if !errors.Is(err, unix.EINVAL) {
		return fd, err
	}
	// Before Linux 6.9 a pidfd names a whole thread group; its leader
	// shares the fd table of the threads it started.
	st, err := readTaskStatus(tid)
	if err != nil {
		return -1, err
	}
	return unix.PidfdOpen(st.tgid, 0)
}

// seccompNotifAddfd is struct seccomp_notif_addfd.
type seccompNotifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

// sendAddfd installs src in the target as the result of its call, and
// answers the call with it in the same step (Linux 5.14).
func sendAddfd(listener uintptr, id uint64, src int, flags uint32) error {
	a := seccompNotifAddfd{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SEND, Srcfd: uint32(src), NewfdFlags: flags}
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&a))
}

// fsCall decodes n when it is a call of the metadata or lookup families,
// an inode ioctl, or an O_PATH open the daemon performs.
func (s *supervisor) fsCall(n *seccompNotif) (fsCall, bool) {
	switch n.Data.Nr {
	case nrOpen, nrOpenat:
		if !s.lookups {
			return fsCall{}, false
		}
		flags, ok := isOPathOpen(n)
		if !ok {
			return fsCall{}, false
		}
		c, ok := decodeFsCall(n)
		c.op, c.flags, c.follow = writeCallNames()[n.Data.Nr], flags, flags&unix.O_NOFOLLOW == 0
		return c, ok
	case nrIoctl:
		return decodeFsCall(n)
	}
	if fsCallNames()[n.Data.Nr] == "" {
		return fsCall{}, false
	}
	return decodeFsCall(n)
}

func ioctlPtr(fd uintptr, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// errnoOrEPERM is err's errno, EPERM for an error that carries none.
func errnoOrEPERM(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return unix.EPERM
}
