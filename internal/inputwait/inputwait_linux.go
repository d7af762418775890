//go:build amd64

package inputwait

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The futex operations whose timeouts are read (linux/futex.h).
const (
	futexWait          = 0
	futexWaitBitset    = 9
	futexPrivateFlag   = 128
	futexClockRealtime = 256
)

const (
	// maxProcs bounds one walk, so that a fork bomb in the sandbox costs the
	// daemon an error instead of a walk that never ends.
	maxProcs = 1 << 15
	// maxWatched bounds how many poll or select entries of one task are
	// looked at. The array is the task's own memory: without a bound, a task
	// could make every check copy and stat millions of entries.
	maxWatched = 4096
	// pollfdSize is sizeof(struct pollfd): int fd, short events, short revents.
	pollfdSize = 8
	// readable is the events a reader waits for; poll and epoll share the
	// bit values on Linux.
	readable = unix.EPOLLIN | unix.EPOLLRDNORM
)

// devTTY is /dev/tty's device number. A task reading it reads its
// controlling terminal, which for a task of the terminal's foreground process
// group is that terminal.
var devTTY = unix.Mkdev(5, 0)

// Probe tells what one session's processes wait on. It is safe for
// concurrent use; checks are serialized because they share buffers.
type Probe struct {
	mu     sync.Mutex
	procfd int // procDir's, -1 once closed
	root   int

	// master is set for a terminal session. The foreground process group is
	// asked for through it on every check, without Fd, which would make the
	// daemon's non-blocking master blocking.
	master  syscall.RawConn
	getPgrp func(fd uintptr) // made once so a check does not allocate a closure
	pgrp    int
	pgrpErr error

	// dev and ino identify the input: the terminal's replica or the pipe.
	dev, ino uint64

	// skipRoot leaves root's own tasks out (ExcludeRoot).
	skipRoot bool
	// See PrivateLoopback.
	privateLoopback bool
	waysOut         []netip.AddrPort

	// timerSince is when checks began to see timers due soon, timerSeen
	// when one last did (see Check).
	timerSince, timerSeen time.Time
	// networkSeen is when a check last found the session waiting on the
	// network (see Backoff), and networkTids the tasks it found waiting on
	// it; backoffDue, once a check after it saw a backoff, is when that
	// backoff is over at the latest.
	networkSeen, backoffDue time.Time
	networkTids             []int

	// tasks is the evidence, collected by Explain only.
	tasks *[]Task

	// A check borrows the state of its walk from walkStates: a daemon
	// keeps a probe per session, and sessions spend most of their life
	// between checks.
	*walkState
}

// walkState is the state of one walk, and buffers a check reuses so that
// it does not allocate.
type walkState struct {
	fg     int     // the terminal's foreground group, 0 for none or a pipe
	fgProc bool    // the process being walked may read the input
	pid    int     // the process being walked
	pidfd  int     // its pidfd once a socket of it was looked at, else -1
	best   Verdict // the greatest verdict so far, timers left out
	timer  bool    // a task waits on a timer due soon
	// retrying: the session waited on the network within Backoff, and
	// no backoff seen since is over, so that a timer of an event loop or
	// a sleep due within Backoff is a retry's, which backoff says was
	// seen; soonest is the one due first, and retryTimer the soonest of
	// the tasks that last waited on the network, -1 if they wait on none.
	retrying, backoff   bool
	soonest, retryTimer time.Duration
	// networkWaiters: the tasks this walk found waiting on the network.
	networkWaiters []int
	// datagram: the task being classified waits on a UDP socket.
	datagram bool
	cur      *Task // the task being classified, when collecting

	// call is the syscall record of the task being classified, as read
	// (callLen 0 when it did not fit), and again the same read later.
	call, again [256]byte
	callLen     int
	status      []byte // the task's status, read by switches

	path []byte // NUL-terminated, relative to procfd, of the file being read
	// Same, of the /proc/PID/task/TID/fd/N being stat'ed, or of the
	// task's syscall or status file read by heldClosed.
	link   []byte
	buf    []byte // borrowed from readBuffers for one walk
	stack  []int
	tids   []int
	args   [6]uint64
	ts     [16]byte
	st     unix.Stat_t
	local  [1]unix.Iovec
	remote [1]unix.RemoteIovec
}

var walkStates = sync.Pool{New: func() any { return &walkState{pidfd: -1} }}

// borrowWalk gives p a walk state until returnWalk; p.mu is held, or p
// is not shared yet.
func (p *Probe) borrowWalk() {
	p.walkState = walkStates.Get().(*walkState)
}

func (p *Probe) returnWalk() {
	p.closePidfd()
	p.cur = nil
	walkStates.Put(p.walkState)
	p.walkState = nil
}

// ForTerminal returns a probe for a terminal session. root is the host pid of
// the sandbox's outermost process; the session's processes are its
// descendants, possibly in a child pid and user namespace. master is the PTY
// master the daemon holds; the probe uses it on every check but does not own
// it.
func ForTerminal(root int, master *os.File) (*Probe, error) {
	raw, err := master.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	var st unix.Stat_t
	var peerErr error
	if err := raw.Control(func(fd uintptr) { peerErr = statReplica(int(fd), &st) }); err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	if peerErr != nil {
		return nil, fmt.Errorf("identify pty replica: %w", peerErr)
	}
	p, err := newProbe(root, st.Dev, st.Ino)
	if err != nil {
		return nil, err
	}
	p.master = raw
	p.getPgrp = func(fd uintptr) { p.pgrp, p.pgrpErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }
	return p, nil
}

// statReplica identifies the replica of a PTY master. O_PATH makes the kernel
// skip the tty's open handler, so identifying it neither counts as an open of
// the terminal nor can make it the daemon's controlling terminal.
func statReplica(master int, st *unix.Stat_t) error {
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_PATH|unix.O_CLOEXEC)
	if errno != 0 {
		return fmt.Errorf("TIOCGPTPEER: %w", errno)
	}
	defer unix.Close(int(fd))
	if err := unix.Fstat(int(fd), st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	return nil
}

// ForPipe returns a probe for a pipe session. root is as for ForTerminal;
// stdin is the daemon's write end of the session's stdin pipe, which is
// only stat'ed: a daemon keeps an idle session's end out of the runtime's
// poller (fdwait.Lazy). The probe only remembers which pipe it is and does
// not hold it open.
func ForPipe(root int, stdin syscall.Conn) (*Probe, error) {
	raw, err := stdin.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	var st unix.Stat_t
	var statErr error
	if err := raw.Control(func(fd uintptr) { statErr = unix.Fstat(int(fd), &st) }); err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	if statErr != nil {
		return nil, fmt.Errorf("stdin pipe: fstat: %w", statErr)
	}
	return newProbe(root, st.Dev, st.Ino)
}

// readBuffers lend a walk the buffer it reads /proc into: a probe spends
// most of its life between checks, and a daemon holds one per session.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, 4096)
	return &b
}}

// procDir is the daemon's /proc, opened once and shared by every probe:
// a daemon keeps a probe per session, and a descriptor each would count
// against its RLIMIT_NOFILE, which bounds how many sessions it holds, for
// the same directory every time.
var procDir = sync.OnceValues(func() (int, error) {
	return unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
})

func newProbe(root int, dev, ino uint64) (*Probe, error) {
	if root <= 0 {
		return nil, fmt.Errorf("root pid %d: %w", root, os.ErrInvalid)
	}
	procfd, err := procDir()
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	p := &Probe{procfd: procfd, root: root, dev: dev, ino: ino}
	if childrenFileSeen.Load() {
		return p, nil
	}
	p.borrowWalk()
	defer p.returnWalk()
	// Fail here rather than on the first check when the kernel lacks
	// CONFIG_PROC_CHILDREN. Whether the caller may read it is another
	// matter: a sandbox's init is not dumpable, and a daemon without
	// CAP_SYS_PTRACE over it finds its children by their parent instead.
	p.path = appendPath(p.path[:0], root, root, "children", -1)
	if err := p.stat(p.path); err != nil {
		p.Close()
		return nil, err
	}
	childrenFileSeen.Store(true)
	return p, nil
}

// childrenFileSeen: a probe has found its root's children file, so the
// kernel has them, and later probes do not look again. The lookup walks
// /proc down to the task (about 1.4% of the daemon's CPU at 8 clients
// launching /bin/true), and a root that has gone since is what the first
// check finds anyway, as fs.ErrNotExist, which its caller takes for the
// command's end.
var childrenFileSeen atomic.Bool

// ExcludeRoot leaves root's own tasks out of every check (its descendants
// stay in): for a root that is a sandbox's init, machinery whose own
// timers and waits say nothing about what the session does.
func (p *Probe) ExcludeRoot() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.skipRoot = true
}

// PrivateLoopback says that the session has a loopback of its own (a
// network namespace), on which a TCP connection joins two of its own
// processes, except to waysOut: the addresses there that lead out of the
// sandbox (the daemon's proxy, ports forwarded to the host). Without it,
// every TCP connection is taken as one to the network.
func (p *Probe) PrivateLoopback(waysOut []netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.privateLoopback, p.waysOut = true, waysOut
}

// Close releases the probe. Closing twice is harmless; a closed probe's
// Waiting returns an error. The shared /proc stays open for the next
// probe.
func (p *Probe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.procfd = -1
	return nil
}

// Check tells what the session is doing right now, by the rule in the
// package documentation. It walks root's descendants, and stops early at a
// task that can run. Processes that exit during the walk are skipped, and
// so are those the caller may not inspect (a non-dumpable process, such as
// ssh-agent, under a daemon without CAP_SYS_PTRACE over it): one such
// process must not blind the check to all the others.
func (p *Probe) Check() (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.borrowWalk()
	defer p.returnWalk()
	p.tasks = nil
	v, timer, err := p.walk()
	if err != nil {
		return Running, err
	}
	// A timer due soon counts once checks have kept seeing it for a while,
	// and until they have not for as long: event loops keep timers of
	// their own (housekeeping, a cursor's blink) that now and then fall due
	// at the moment of a check, where a program retrying or animating has
	// one due soon all along. A walk cut short at a running task saw
	// nothing of timers either way. Only a check that sees no timer ends
	// a run of sightings, not the time between checks: the caller checks
	// less often while nothing changes, and a program with a timer due
	// soon all along would otherwise lose it at the first check that
	// comes later than TimerConfirm, and look waiting for input.
	if v == Busy {
		return Running, nil
	}
	now := time.Now()
	p.noteTimer(timer, now)
	if p.timerConfirmed(now) {
		v = max(v, Progress)
	}
	if p.backoff {
		// The backoff of a retry comes right after the attempt that
		// failed, and is not confirmed over checks as a timer due soon
		// is: a check at its start would tell the session waiting for
		// input.
		v = max(v, Progress)
	}
	switch {
	case v == Network:
		p.networkSeen, p.backoffDue = now, time.Time{}
		p.networkTids = append(p.networkTids[:0], p.networkWaiters...)
	case p.backoff && p.backoffDue.IsZero():
		// A backoff ends in the next attempt, on the network. A timer
		// that falls due without one was the program's own (an idle
		// prompt's housekeeping after its last request): from then on
		// its timers are taken as such again. The next attempt is made
		// by a task that made the last one, so the backoff is the
		// soonest timer of those; another thread's says nothing of when
		// the attempt comes (right after a system call returns, a Go
		// runtime's monitor thread sleeps 20 us to 10 ms at a time: taken
		// for the backoff, it ended the backoff as it began). They may
		// wait a moment on something else first (a processor for a
		// goroutine, a lock), so only once they have waited on no timer
		// for TimerConfirm since the network is the soonest timer of any
		// task taken: their runtime may have moved the work to another
		// thread.
		switch {
		case p.retryTimer >= 0:
			p.backoffDue = now.Add(p.retryTimer)
		case now.Sub(p.networkSeen) >= TimerConfirm:
			p.backoffDue = now.Add(p.soonest)
		}
	}
	return v.state(), nil
}

// noteTimer records whether a check at now saw a timer due soon.
func (p *Probe) noteTimer(seen bool, now time.Time) {
	switch {
	case seen:
		if p.timerSince.IsZero() {
			p.timerSince = now
		}
		p.timerSeen = now
	case !p.timerSince.IsZero() && now.Sub(p.timerSeen) > TimerConfirm:
		p.timerSince, p.timerSeen = time.Time{}, time.Time{}
	}
}

// timerConfirmed says whether the checks up to now have seen a timer due
// soon for TimerConfirm, and have not stopped seeing it for as long.
func (p *Probe) timerConfirmed(now time.Time) bool {
	return !p.timerSince.IsZero() && p.timerSeen.Sub(p.timerSince) >= TimerConfirm && now.Sub(p.timerSeen) <= TimerConfirm
}

// Explain is Check with the evidence: what each task of the session is
// blocked in and on which files. Unlike Check it takes a timer due soon at
// once; it is meant for people, not for state changes.
func (p *Probe) Explain() (State, []Task, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.borrowWalk()
	defer p.returnWalk()
	tasks := []Task{}
	p.tasks = &tasks
	defer func() { p.tasks = nil }()
	v, timer, err := p.walk()
	if err != nil {
		return Running, nil, err
	}
	if timer || p.backoff {
		v = max(v, Progress)
	}
	return v.state(), tasks, nil
}

// Waiting reports whether the session waits for input (Check says
// WaitingForInput).
func (p *Probe) Waiting() (bool, error) {
	st, err := p.Check()
	return st == WaitingForInput, err
}

// walk goes through the session's tasks and returns the verdict they add
// up to, leaving out timers, and whether one waits on a timer due soon.
func (p *Probe) walk() (Verdict, bool, error) {
	if p.procfd < 0 {
		return Busy, false, fmt.Errorf("input-wait probe: %w", os.ErrClosed)
	}
	buf := readBuffers.Get().(*[]byte)
	p.buf = *buf
	defer func() {
		*buf, p.buf = p.buf, nil
		readBuffers.Put(buf)
	}()
	p.fg = 0
	if p.master != nil {
		if err := p.master.Control(p.getPgrp); err != nil {
			return Busy, false, fmt.Errorf("pty master: %w", err)
		}
		if p.pgrpErr != nil {
			return Busy, false, fmt.Errorf("foreground process group: %w", p.pgrpErr)
		}
		// A terminal without a foreground group (its session is over)
		// has nobody reading it: fg stays 0 and no task counts as input.
		p.fg = max(p.pgrp, 0)
	}
	p.best, p.timer, p.backoff, p.soonest, p.retryTimer = Idle, false, false, Backoff, -1
	p.networkWaiters = p.networkWaiters[:0]
	now := time.Now()
	p.retrying = !p.networkSeen.IsZero() && now.Sub(p.networkSeen) <= Backoff &&
		(p.backoffDue.IsZero() || !now.After(p.backoffDue.Add(TimerConfirm)))
	p.stack = append(p.stack[:0], p.root)
	for walked := 0; len(p.stack) > 0; walked++ {
		if walked == maxProcs {
			return Busy, false, fmt.Errorf("more than %d processes under pid %d", maxProcs, p.root)
		}
		pid := p.stack[len(p.stack)-1]
		p.stack = p.stack[:len(p.stack)-1]
		err := p.process(pid)
		p.closePidfd()
		if err != nil && !gone(err) {
			return Busy, false, err
		}
		if p.best == Busy && p.tasks == nil {
			break
		}
	}
	return p.best, p.timer, nil
}

// process checks the tasks of pid and pushes its children for the walk.
func (p *Probe) process(pid int) error {
	p.path = appendPath(p.path[:0], pid, -1, "stat", -1)
	n, err := p.read(true)
	if err != nil {
		return err
	}
	state, procPgrp, threads, ok := parseStat(p.buf[:n])
	if !ok {
		return fmt.Errorf("parse /proc/%d/stat: %q", pid, p.buf[:n])
	}
	// Most processes have one thread, whose tid is the pid: listing the task
	// directory would cost them a directory read for nothing. A zombie
	// leader with live threads is the exception: its threads have other tids.
	p.tids = append(p.tids[:0], pid)
	if threads != 1 || state == 'Z' {
		if err := p.listTasks(pid); err != nil {
			return err
		}
	}
	// For a terminal, only the foreground group reads it: the kernel stops
	// a reader in the background with SIGTTIN.
	p.fgProc = p.master == nil || (p.fg != 0 && procPgrp == p.fg)
	p.pid = pid
	for _, tid := range p.tids {
		var err error
		if !p.skipRoot || pid != p.root {
			err = p.task(pid, tid)
		}
		if err != nil && !gone(err) && !denied(err) {
			return err
		}
		if p.best == Busy && p.tasks == nil {
			return nil
		}
		// A child forked by a thread other than the leader is listed only
		// under that thread.
		err = p.pushChildren(pid, tid)
		if err != nil && denied(err) {
			// The children are found by their parent, for all threads at
			// once.
			return p.pushChildrenByParent(pid)
		}
		if err != nil && !gone(err) {
			return err
		}
	}
	return nil
}

// task classifies one task: what it is blocked in, on what, and for how
// long at most.
func (p *Probe) task(pid, tid int) error {
	p.path = appendPath(p.path[:0], pid, tid, "syscall", -1)
	n, err := p.read(true)
	if err != nil {
		return err
	}
	nr, inCall := parseSyscall(p.buf[:n], &p.args)
	var t *Task
	if p.tasks != nil {
		*p.tasks = append(*p.tasks, Task{Pid: pid, Tid: tid, Command: p.command(pid, tid), Syscall: "running", TimeoutMs: -1})
		t = &(*p.tasks)[len(*p.tasks)-1]
		if inCall {
			t.Syscall = syscallName(nr)
		}
	}
	p.cur = t
	p.datagram = false
	v, timeout := Idle, time.Duration(-1)
	if inCall {
		// For heldClosed: blockedOn reads into p.buf.
		p.callLen = 0
		if n < len(p.call) {
			p.callLen = copy(p.call[:], p.buf[:n])
		}
		v, timeout, err = p.blockedOn(pid, tid, nr)
		if err != nil {
			return err
		}
	}
	if p.datagram && timeout >= 0 {
		// A datagram socket waited on until a timeout is a client's that
		// awaits a reply (a name lookup); a server waits on its socket
		// without one.
		v = max(v, Network)
	}
	// A task stopped by a signal while it was blocked (Ctrl-Z, SIGSTOP,
	// SIGTTIN) still shows its system call: the kernel keeps the number to
	// restart it on SIGCONT. Only a sleeping task waits; one on a CPU or in
	// an uninterruptible sleep (the disk, a vfork) is busy. The state is
	// read after the system call so that a task continued in between counts:
	// it is back in its wait.
	p.path = appendPath(p.path[:0], pid, tid, "stat", -1)
	if n, err = p.read(true); err != nil {
		return err
	}
	state, _, _, _ := parseStat(p.buf[:n])
	switch state {
	case 'S':
	case 'R', 'D', 'W':
		v, timeout = Busy, -1
		if t != nil {
			t.Syscall = "running"
			t.Files = nil
		}
	default:
		v, timeout = Idle, -1
	}
	soon := timeout >= 0 && timeout <= SoonTimer
	backoff := p.retrying && timeout >= 0 && timeout <= Backoff && inCall && timerWait(nr)
	if t != nil {
		t.Verdict = v
		if timeout >= 0 {
			t.TimeoutMs = timeout.Milliseconds()
		}
		if (soon || backoff) && t.Verdict < Progress {
			t.Verdict = Progress
		}
	}
	p.best = max(p.best, v)
	p.timer = p.timer || soon
	p.backoff = p.backoff || backoff
	if backoff {
		p.soonest = min(p.soonest, timeout)
		if (p.retryTimer < 0 || timeout < p.retryTimer) && slices.Contains(p.networkTids, tid) {
			p.retryTimer = timeout
		}
	}
	if v == Network {
		p.networkWaiters = append(p.networkWaiters, tid)
	}
	return nil
}

// timerWait says whether system call nr waits until a timer of the
// program's own: an event loop's wait, whose timeout is when its next
// timer is due, or a sleep. A futex's timeout is left out: a thread pool's
// idle workers wait on one until they retire (tokio's after 10 s), which
// lets nothing go on, and they have just been busy with the attempt.
func timerWait(nr int) bool {
	switch nr {
	case unix.SYS_POLL, unix.SYS_PPOLL, unix.SYS_SELECT, unix.SYS_PSELECT6,
		unix.SYS_EPOLL_WAIT, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
		unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP:
		return true
	}
	return false
}

// blockedOn classifies the wait of a task blocked in system call nr.
func (p *Probe) blockedOn(pid, tid, nr int) (Verdict, time.Duration, error) {
	a := &p.args
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_PREAD64, unix.SYS_PREADV, unix.SYS_PREADV2:
		// A read of a closed file: most likely of a pipe or a terminal,
		// which a program reads with read; a socket has recv.
		v, err := p.fd(pid, tid, int32(a[0]), unix.EPOLLIN, Idle)
		return v, -1, err
	case unix.SYS_RECVFROM, unix.SYS_RECVMSG, unix.SYS_RECVMMSG:
		// A socket closed while a recv waits on it may be a connection
		// whose answer will still end the wait.
		v, err := p.fd(pid, tid, int32(a[0]), unix.EPOLLIN, Busy)
		return v, -1, err
	case unix.SYS_CONNECT:
		// A connection being set up goes on being set up when its
		// descriptor is closed: the call holds the socket.
		v, err := p.fd(pid, tid, int32(a[0]), unix.EPOLLOUT, Network)
		return v, -1, err
	case unix.SYS_POLL:
		v, err := p.pollSet(pid, tid, a[0], a[1])
		return v, msTimeout(a[2]), err
	case unix.SYS_PPOLL:
		v, err := p.pollSet(pid, tid, a[0], a[1])
		return v, p.timespec(tid, a[2], false, 0), err
	case unix.SYS_SELECT, unix.SYS_PSELECT6:
		v, err := p.selectSet(pid, tid, a[0], a[1], unix.EPOLLIN)
		if err == nil && v < Network {
			var w Verdict
			w, err = p.selectSet(pid, tid, a[0], a[2], unix.EPOLLOUT)
			v = max(v, w)
		}
		if nr == unix.SYS_SELECT {
			return v, p.timeval(tid, a[4]), err
		}
		return v, p.timespec(tid, a[4], false, 0), err
	case unix.SYS_EPOLL_WAIT, unix.SYS_EPOLL_PWAIT:
		v, err := p.epollSet(pid, tid, int32(a[0]))
		return v, msTimeout(a[3]), err
	case unix.SYS_EPOLL_PWAIT2:
		v, err := p.epollSet(pid, tid, int32(a[0]))
		return v, p.timespec(tid, a[3], false, 0), err
	case unix.SYS_NANOSLEEP:
		return Idle, p.timespec(tid, a[0], false, 0), nil
	case unix.SYS_CLOCK_NANOSLEEP:
		return Idle, p.timespec(tid, a[2], a[1]&unix.TIMER_ABSTIME != 0, int32(a[0])), nil
	case unix.SYS_FUTEX:
		return Idle, p.futexTimeout(tid), nil
	}
	return Idle, -1, nil
}

// futexTimeout is how long a futex wait lasts at most: FUTEX_WAIT takes a
// relative timeout, FUTEX_WAIT_BITSET an absolute one on the monotonic
// clock or, with FUTEX_CLOCK_REALTIME, the real-time one.
func (p *Probe) futexTimeout(tid int) time.Duration {
	op := p.args[1]
	switch op &^ (futexPrivateFlag | futexClockRealtime) {
	case futexWait:
		return p.timespec(tid, p.args[3], false, 0)
	case futexWaitBitset:
		clock := int32(unix.CLOCK_MONOTONIC)
		if op&futexClockRealtime != 0 {
			clock = unix.CLOCK_REALTIME
		}
		return p.timespec(tid, p.args[3], true, clock)
	}
	return -1
}

func msTimeout(arg uint64) time.Duration {
	ms := int32(arg)
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// timespec reads a struct timespec from the task's memory: a relative
// timeout, or with abs a deadline on clock, returned as the time left.
// No address means no timeout.
func (p *Probe) timespec(tid int, addr uint64, abs bool, clock int32) time.Duration {
	if addr == 0 {
		return -1
	}
	b, err := p.peek(tid, addr, p.ts[:])
	if err != nil || len(b) < 16 {
		return -1
	}
	d := time.Duration(int64(binary.NativeEndian.Uint64(b)))*time.Second + time.Duration(int64(binary.NativeEndian.Uint64(b[8:])))
	if abs {
		var now unix.Timespec
		if unix.ClockGettime(clock, &now) != nil {
			return -1
		}
		d -= time.Duration(now.Nano())
	}
	return max(d, 0)
}

// timeval reads select's struct timeval.
func (p *Probe) timeval(tid int, addr uint64) time.Duration {
	if addr == 0 {
		return -1
	}
	b, err := p.peek(tid, addr, p.ts[:])
	if err != nil || len(b) < 16 {
		return -1
	}
	return max(time.Duration(int64(binary.NativeEndian.Uint64(b)))*time.Second+time.Duration(int64(binary.NativeEndian.Uint64(b[8:])))*time.Microsecond, 0)
}

// fd classifies one file a task waits on, for events (EPOLLIN and
// EPOLLOUT bits). closed is the verdict for a file another thread closed
// while the task waits on it: the call holds the file and waits on, on a
// file nothing here can name any more. Busy for a call whose wait such a
// file may still end without input (a poll or a recv of a socket whose
// answer comes in), which can be told neither from idle nor from the
// network.
func (p *Probe) fd(pid, tid int, fd int32, events uint64, closed Verdict) (Verdict, error) {
	if fd < 0 {
		return Idle, nil
	}
	p.link = appendPath(p.link[:0], pid, tid, "fd/", int(fd))
	if err := p.stat(p.link); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return Idle, err
		}
		if closed != Busy && p.heldClosed(pid, tid, fd) {
			if p.cur != nil {
				p.cur.Files = append(p.cur.Files, File{Fd: int(fd), Kind: "closed", Detail: "closed by another thread while the call waits on it", Verdict: closed})
			}
			return closed, nil
		}
		// Closed while the call waits on it, or, as far as this check
		// can tell, since the call was read: the task may have moved on,
		// and what this check read of it is half of two states. Taken as
		// busy, the check tells nothing of it; taken as idle, the end of
		// a network attempt (its socket closed, its poll's timeout nearly
		// over) would pass for a backoff due at once, and the real
		// backoff after it, seen once that is over, for a wait for input.
		if p.cur != nil {
			p.cur.Files = append(p.cur.Files, File{Fd: int(fd), Kind: "closed", Detail: "closed while the call waits on it, or since it was read", Verdict: Busy})
		}
		return Busy, nil
	}
	return p.file(pid, tid, fd, events)
}

// heldClosed reports whether task tid of pid still waits, in the system
// call this check found it in, on the file fd named before it was closed.
// An unchanged syscall record alone does not tell: a loop that closes fd
// and makes the next file, which the kernel numbers fd again (the lowest
// free number), then the same call on it, reads the same. So the task's
// context switches are read, fd stat'ed again, the syscall record read
// again, then the switches again. A task the second record finds off its
// CPU in the call, and that was switched off its CPU no time between the
// two reads of its switches, was off it, in that same call, from the
// first read to the second record, across the stat that found fd closed.
func (p *Probe) heldClosed(pid, tid int, fd int32) bool {
	if p.callLen == 0 {
		return false
	}
	before, ok := p.switches(pid, tid)
	if !ok {
		return false
	}
	p.link = appendPath(p.link[:0], pid, tid, "fd/", int(fd))
	if err := p.stat(p.link); !errors.Is(err, unix.ENOENT) {
		return false
	}
	p.link = appendPath(p.link[:0], pid, tid, "syscall", -1)
	rfd, err := p.open(p.link, unix.O_RDONLY)
	if err != nil {
		return false
	}
	n, err := unix.Read(rfd, p.again[:])
	unix.Close(rfd)
	// A record is read only of a task off its CPU ("running" otherwise).
	if err != nil || !bytes.Equal(p.again[:n], p.call[:p.callLen]) {
		return false
	}
	after, ok := p.switches(pid, tid)
	return ok && after == before
}

var switchKeys = [...][]byte{[]byte("\nvoluntary_ctxt_switches:"), []byte("\nnonvoluntary_ctxt_switches:")}

// switches is how many times task tid of pid was switched off its CPU,
// from its status: voluntary_ctxt_switches and nonvoluntary_ctxt_switches.
func (p *Probe) switches(pid, tid int) (uint64, bool) {
	p.link = appendPath(p.link[:0], pid, tid, "status", -1)
	fd, err := p.open(p.link, unix.O_RDONLY)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	if p.status == nil {
		p.status = make([]byte, 4096)
	}
	n := 0
	for {
		m, err := unix.Read(fd, p.status[n:])
		if err != nil {
			return 0, false
		}
		n += m
		if m == 0 {
			break
		}
		if n == len(p.status) {
			p.status = slices.Grow(p.status, len(p.status))[:2*len(p.status)]
		}
	}
	var sum uint64
	for _, key := range switchKeys {
		i := bytes.Index(p.status[:n], key)
		if i < 0 {
			return 0, false
		}
		f, _ := nextField(p.status[i+len(key) : n])
		v, ok := parseUint(f, 10)
		if !ok {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

// file classifies the file of fd that p.st describes.
func (p *Probe) file(pid, tid int, fd int32, events uint64) (Verdict, error) {
	v, kind, detail := Idle, "", ""
	mode := p.st.Mode & unix.S_IFMT
	switch {
	case p.st.Dev == p.dev && p.st.Ino == p.ino || p.master != nil && mode == unix.S_IFCHR && p.st.Rdev == devTTY:
		kind = "stdin"
		if p.master != nil {
			kind = "terminal"
		}
		if events&readable != 0 && p.fgProc {
			v = Input
		} else if p.tasks != nil {
			detail = "not read by the terminal's foreground process group"
		}
	case mode == unix.S_IFSOCK:
		var err error
		v, kind, detail, err = p.socket(pid, fd)
		if err != nil {
			return Idle, err
		}
	}
	if p.cur != nil {
		if kind == "" {
			kind = p.fileKind(pid, tid, fd, mode)
		}
		p.cur.Files = append(p.cur.Files, File{Fd: int(fd), Kind: kind, Detail: detail, Verdict: v})
	}
	return v, nil
}

// pollSet classifies the pollfd array of a task blocked in poll or
// ppoll. The array stays in the task's memory, unchanged, while the call
// sleeps.
func (p *Probe) pollSet(pid, tid int, addr, nfds uint64) (Verdict, error) {
	v := Idle
	nfds = min(nfds, maxWatched)
	for done := uint64(0); done < nfds; {
		chunk := min(nfds-done, uint64(len(p.buf)/pollfdSize))
		b, err := p.peek(tid, addr+done*pollfdSize, p.buf[:chunk*pollfdSize])
		if err != nil || len(b) < pollfdSize {
			return v, err
		}
		done += uint64(len(b) / pollfdSize)
		for ; len(b) >= pollfdSize; b = b[pollfdSize:] {
			fd := int32(binary.NativeEndian.Uint32(b))
			events := uint64(binary.NativeEndian.Uint16(b[4:]))
			if events&(readable|unix.EPOLLOUT) == 0 {
				continue
			}
			w, err := p.fd(pid, tid, fd, events, Busy)
			if err != nil {
				return v, err
			}
			v = max(v, w)
		}
	}
	return v, nil
}

// selectSet classifies an fd_set of a task blocked in select or pselect6,
// for events.
func (p *Probe) selectSet(pid, tid int, nfds, addr, events uint64) (Verdict, error) {
	if addr == 0 {
		return Idle, nil
	}
	nfds = min(nfds, maxWatched)
	// fd_set is an array of longs: on little-endian amd64, byte fd/8 holds
	// bit fd%8.
	b, err := p.peek(tid, addr, p.buf[:(nfds+63)/64*8])
	if err != nil {
		return Idle, err
	}
	v := Idle
	for fd := 0; fd < int(nfds) && fd/8 < len(b); fd++ {
		if b[fd/8]&(1<<(fd%8)) == 0 {
			continue
		}
		w, err := p.fd(pid, tid, int32(fd), events, Busy)
		if err != nil {
			return v, err
		}
		v = max(v, w)
	}
	return v, nil
}

// peek copies len(b) bytes from addr in task tid's memory and returns what
// could be read. An address the task cannot read is not an error: the task
// passed garbage, or the call returned and the memory moved on.
func (p *Probe) peek(tid int, addr uint64, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	p.local[0].Base = &b[0]
	p.local[0].SetLen(len(b))
	p.remote[0] = unix.RemoteIovec{Base: uintptr(addr), Len: len(b)}
	n, err := unix.ProcessVMReadv(tid, p.local[:], p.remote[:], 0)
	if errors.Is(err, unix.EFAULT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read memory of task %d: %w", tid, err)
	}
	return b[:n], nil
}

// epollSet classifies the files the epoll instance a task is blocked on
// watches. Its fdinfo has a line per watched file,
//
//	tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:18
//
// with the file's inode and its superblock's device, so the file is
// identified without trusting that tfd still names it. The file is streamed
// through buf: an epoll set can be large, its lines are short.
func (p *Probe) epollSet(pid, tid int, epfd int32) (Verdict, error) {
	if epfd < 0 {
		return Idle, nil
	}
	p.path = appendPath(p.path[:0], pid, tid, "fdinfo/", int(epfd))
	fd, err := p.open(p.path, unix.O_RDONLY)
	if err != nil {
		return Idle, err
	}
	defer unix.Close(fd)
	v, kept, seen := Idle, 0, 0
	for {
		n, err := unix.Read(fd, p.buf[kept:])
		if err != nil {
			return v, pathErr("read", p.path, err)
		}
		data := p.buf[:kept+n]
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if seen < maxWatched {
				w, counted, err := p.epollEntry(pid, tid, data[:i])
				if err != nil {
					return v, err
				}
				if counted {
					seen++
				}
				v = max(v, w)
			}
			data = data[i+1:]
		}
		// A full buffer without a newline cannot happen with the kernel's
		// short lines; it would read as the end, never as a false match.
		if n == 0 {
			return v, nil
		}
		kept = copy(p.buf, data)
	}
}

func (p *Probe) epollEntry(pid, tid int, line []byte) (Verdict, bool, error) {
	tfd, events, ino, sdev, ok := parseEpollEntry(line)
	if !ok || events&(readable|unix.EPOLLOUT) == 0 {
		return Idle, false, nil
	}
	// sdev is the kernel's internal dev_t: 12 bits of major, 20 of minor.
	dev := unix.Mkdev(uint32(sdev>>20), uint32(sdev&(1<<20-1)))
	p.link = appendPath(p.link[:0], pid, tid, "fd/", int(tfd))
	if err := p.stat(p.link); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Idle, true, nil
		}
		return Idle, true, err
	}
	// tfd is trusted once it names the watched inode; a file closed and
	// its number reused since is no longer in the set.
	if p.st.Dev != dev || p.st.Ino != ino {
		return Idle, true, nil
	}
	v, err := p.file(pid, tid, tfd, events)
	return v, true, err
}

// socket classifies a socket the task of pid waits on, looked at through a
// copy of its file descriptor: a TCP connection being set up, or with data
// unsent, unacknowledged, or sent later than anything was received (a
// request without its answer yet), waits on the network; a local stream
// socket whose peer has not yet read what it was sent waits on that peer.
// Anything else (a listener, an idle connection, a datagram socket) waits
// on nothing in particular. A socket the caller may not copy is taken as
// such.
func (p *Probe) socket(pid int, fd int32) (Verdict, string, string, error) {
	if p.pidfd < 0 {
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				return Idle, "socket", "", nil
			}
			return Idle, "socket", "", fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
		p.pidfd = pidfd
	}
	sfd, err := unix.PidfdGetfd(p.pidfd, int(fd), 0)
	if err != nil {
		// Closed since (EBADF), or not the caller's to copy.
		return Idle, "socket", "", nil
	}
	defer unix.Close(sfd)
	domain, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return Idle, "socket", "", nil
	}
	typ, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return Idle, "socket", "", nil
	}
	switch {
	case (domain == unix.AF_INET || domain == unix.AF_INET6) && typ == unix.SOCK_STREAM:
		info, err := unix.GetsockoptTCPInfo(sfd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return Idle, "tcp", "", nil
		}
		kind := "tcp"
		if domain == unix.AF_INET6 {
			kind = "tcp6"
		}
		peer := sockAddr(unix.Getpeername(sfd))
		if p.privateLoopback && peer.Addr().Unmap().IsLoopback() && !p.wayOut(peer) {
			// The session's own loopback: the peer is one of its own
			// processes, whose wait counts for itself.
			if p.tasks == nil {
				return Idle, kind, "", nil
			}
			return Idle, kind, endpoints(sfd) + ", on the sandbox's own loopback", nil
		}
		v, why := tcpVerdict(info)
		if p.tasks == nil {
			return v, kind, "", nil
		}
		return v, kind, endpoints(sfd) + why, nil
	case domain == unix.AF_UNIX && typ != unix.SOCK_DGRAM:
		queued, err := unix.IoctlGetInt(sfd, unix.SIOCOUTQ)
		if err == nil && queued > 0 {
			return Progress, "unix", fmt.Sprintf("%d bytes sent, not yet read by the peer", queued), nil
		}
		return Idle, "unix", "", nil
	case domain == unix.AF_INET && typ == unix.SOCK_DGRAM:
		p.datagram = true
		return Idle, "udp", "", nil
	case domain == unix.AF_INET6 && typ == unix.SOCK_DGRAM:
		p.datagram = true
		return Idle, "udp6", "", nil
	case domain == unix.AF_UNIX:
		return Idle, "unix", "", nil
	}
	return Idle, "socket", "", nil
}

// tcpVerdict reads a connection's state from the kernel's TCP_INFO.
func tcpVerdict(info *unix.TCPInfo) (Verdict, string) {
	switch info.State {
	case unix.BPF_TCP_SYN_SENT:
		return Network, ", connecting"
	case unix.BPF_TCP_ESTABLISHED:
	default:
		return Idle, ""
	}
	switch {
	case info.Notsent_bytes > 0 || info.Unacked > 0:
		return Network, ", sending"
	case info.Data_segs_out > 0 && info.Data_segs_in == 0:
		return Network, fmt.Sprintf(", request sent %dms ago, no answer yet", info.Last_data_sent)
	case info.Last_data_sent < info.Last_data_recv:
		// Both count milliseconds back from now: the last data went out
		// after the last came in. (In the same tick they are equal, and an
		// answer can come no sooner than its request.)
		return Network, fmt.Sprintf(", request sent %dms ago, no answer since", info.Last_data_sent)
	}
	return Idle, ", idle"
}

// endpoints names a connected socket's two ends, "local -> peer".
func endpoints(fd int) string {
	return sockAddr(unix.Getsockname(fd)).String() + " -> " + sockAddr(unix.Getpeername(fd)).String()
}

// sockAddr is an IP socket address as an AddrPort, the zero one for any
// other.
func sockAddr(sa unix.Sockaddr, err error) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

func (p *Probe) wayOut(peer netip.AddrPort) bool {
	for _, w := range p.waysOut {
		if w.Port() == peer.Port() && w.Addr().Unmap() == peer.Addr().Unmap() {
			return true
		}
	}
	return false
}

func (p *Probe) closePidfd() {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
}

// fileKind names what fd of a task is, for the evidence, from the target
// of its /proc link.
func (p *Probe) fileKind(pid, tid int, fd int32, mode uint32) string {
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%d/fd/%d", pid, tid, fd))
	if err != nil {
		return "file"
	}
	switch {
	case strings.HasPrefix(target, "pipe:"):
		return "pipe"
	case strings.HasPrefix(target, "anon_inode:"):
		k := strings.Trim(strings.TrimPrefix(target, "anon_inode:"), "[]")
		switch k {
		case "timerfd", "eventfd", "signalfd", "inotify":
			return k
		case "eventpoll":
			return "epoll"
		}
		return k
	case mode == unix.S_IFCHR:
		return "device " + target
	}
	return "file"
}

// command is the task's name, for the evidence.
func (p *Probe) command(pid, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// listTasks replaces p.tids with the tids of pid.
func (p *Probe) listTasks(pid int) error {
	p.path = appendPath(p.path[:0], pid, -1, "task", -1)
	fd, err := p.open(p.path, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	p.tids = p.tids[:0]
	for {
		n, err := unix.Getdents(fd, p.buf)
		if err != nil {
			return pathErr("getdents", p.path, err)
		}
		if n == 0 {
			return nil
		}
		p.tids = appendDirents(p.tids, p.buf[:n])
	}
}

// pushChildren pushes the children of task tid for the walk.
func (p *Probe) pushChildren(pid, tid int) error {
	p.path = appendPath(p.path[:0], pid, tid, "children", -1)
	n, err := p.read(false)
	if err != nil {
		return err
	}
	rest := p.buf[:n]
	for {
		var f []byte
		if f, rest = nextField(rest); len(f) == 0 {
			return nil
		}
		child, ok := parseUint(f, 10)
		if !ok {
			return fmt.Errorf("parse /proc/%d/task/%d/children: %q", pid, tid, p.buf[:n])
		}
		p.stack = append(p.stack, int(child))
	}
}

// pushChildrenByParent pushes the children of pid found by the parent
// field of every process's stat, which anyone may read: the way to a
// process's children when its children files are closed to the caller. It
// reads all of /proc, so it is kept for that case.
func (p *Probe) pushChildrenByParent(pid int) error {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list /proc: %w", err)
	}
	for _, e := range dir {
		child, ok := parseUint([]byte(e.Name()), 10)
		if !ok || int(child) == pid {
			continue
		}
		p.path = appendPath(p.path[:0], int(child), -1, "stat", -1)
		n, err := p.read(true)
		if err != nil {
			if gone(err) {
				continue
			}
			return err
		}
		if ppid, ok := parsePpid(p.buf[:n]); ok && ppid == pid {
			p.stack = append(p.stack, int(child))
		}
	}
	return nil
}

// denied tells whether err means the caller may not inspect the task.
func denied(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
}

// gone tells whether err means the process or task went away mid-check.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
}

// syscallName names the system calls a task may be found waiting in.
func syscallName(nr int) string {
	switch nr {
	case unix.SYS_READ:
		return "read"
	case unix.SYS_READV:
		return "readv"
	case unix.SYS_PREAD64:
		return "pread64"
	case unix.SYS_PREADV:
		return "preadv"
	case unix.SYS_PREADV2:
		return "preadv2"
	case unix.SYS_RECVFROM:
		return "recvfrom"
	case unix.SYS_RECVMSG:
		return "recvmsg"
	case unix.SYS_RECVMMSG:
		return "recvmmsg"
	case unix.SYS_CONNECT:
		return "connect"
	case unix.SYS_ACCEPT, unix.SYS_ACCEPT4:
		return "accept"
	case unix.SYS_POLL:
		return "poll"
	case unix.SYS_PPOLL:
		return "ppoll"
	case unix.SYS_SELECT:
		return "select"
	case unix.SYS_PSELECT6:
		return "pselect6"
	case unix.SYS_EPOLL_WAIT:
		return "epoll_wait"
	case unix.SYS_EPOLL_PWAIT:
		return "epoll_pwait"
	case unix.SYS_EPOLL_PWAIT2:
		return "epoll_pwait2"
	case unix.SYS_NANOSLEEP:
		return "nanosleep"
	case unix.SYS_CLOCK_NANOSLEEP:
		return "clock_nanosleep"
	case unix.SYS_FUTEX:
		return "futex"
	case unix.SYS_WAIT4:
		return "wait4"
	case unix.SYS_WAITID:
		return "waitid"
	case unix.SYS_PAUSE:
		return "pause"
	case unix.SYS_RT_SIGSUSPEND:
		return "rt_sigsuspend"
	case unix.SYS_RT_SIGTIMEDWAIT:
		return "rt_sigtimedwait"
	case unix.SYS_WRITE:
		return "write"
	}
	return "syscall " + strconv.Itoa(nr)
}
