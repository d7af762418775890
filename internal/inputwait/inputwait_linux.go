//go:build amd64

package inputwait

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
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

// Probe tells whether one session is blocked reading its input. It is safe
// for concurrent use; checks are serialized because they share buffers.
type Probe struct {
	mu     sync.Mutex
	procfd int // the daemon's /proc, -1 once closed
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

	// Reused across checks so that a check does not allocate.
	path   []byte // NUL-terminated, relative to procfd, of the file being read
	link   []byte // same, of the /proc/PID/task/TID/fd/N being stat'ed
	buf    []byte
	stack  []int
	tids   []int
	args   [6]uint64
	st     unix.Stat_t
	local  [1]unix.Iovec
	remote [1]unix.RemoteIovec
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
// stdin is the daemon's write end of the session's stdin pipe. The probe only
// remembers which pipe it is and does not hold it open.
func ForPipe(root int, stdin *os.File) (*Probe, error) {
	fi, err := stdin.Stat()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("stdin pipe: stat gave %T", fi.Sys())
	}
	return newProbe(root, st.Dev, st.Ino)
}

func newProbe(root int, dev, ino uint64) (*Probe, error) {
	if root <= 0 {
		return nil, fmt.Errorf("root pid %d: %w", root, os.ErrInvalid)
	}
	procfd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	p := &Probe{procfd: procfd, root: root, dev: dev, ino: ino, buf: make([]byte, 4096)}
	// Fail here rather than on the first check when the kernel lacks
	// CONFIG_PROC_CHILDREN. Whether the caller may read it is another
	// matter: a sandbox's init is not dumpable, and a daemon without
	// CAP_SYS_PTRACE over it finds its children by their parent instead.
	p.path = appendPath(p.path[:0], root, root, "children", -1)
	if err := p.stat(p.path); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close releases the probe. Closing twice is harmless; a closed probe's
// Waiting returns an error.
func (p *Probe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.procfd < 0 {
		return nil
	}
	err := unix.Close(p.procfd)
	p.procfd = -1
	if err != nil {
		return fmt.Errorf("close /proc: %w", err)
	}
	return nil
}

// Waiting reports whether, right now, the session is blocked reading input:
// whether some task, of the foreground process group for a terminal or of
// any process under root for a pipe, sleeps in a read, poll, select or epoll
// wait on the input. It walks root's descendants and stops at the first such
// task. Processes that exit during the walk are skipped, and so are those
// the caller may not inspect (a non-dumpable process, such as ssh-agent,
// under a daemon without CAP_SYS_PTRACE over it): one such process must not
// blind the check to all the others.
func (p *Probe) Waiting() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.procfd < 0 {
		return false, fmt.Errorf("input-wait probe: %w", os.ErrClosed)
	}
	pgrp := 0
	if p.master != nil {
		if err := p.master.Control(p.getPgrp); err != nil {
			return false, fmt.Errorf("pty master: %w", err)
		}
		if p.pgrpErr != nil {
			return false, fmt.Errorf("foreground process group: %w", p.pgrpErr)
		}
		if p.pgrp <= 0 {
			// The terminal has no foreground group (its session is over),
			// so nobody can be reading it.
			return false, nil
		}
		pgrp = p.pgrp
	}
	p.stack = append(p.stack[:0], p.root)
	for walked := 0; len(p.stack) > 0; walked++ {
		if walked == maxProcs {
			return false, fmt.Errorf("more than %d processes under pid %d", maxProcs, p.root)
		}
		pid := p.stack[len(p.stack)-1]
		p.stack = p.stack[:len(p.stack)-1]
		waiting, err := p.process(pid, pgrp)
		if err != nil && !gone(err) {
			return false, err
		}
		if waiting {
			return true, nil
		}
	}
	return false, nil
}

// process checks the tasks of pid (all of them, or none when pgrp is set and
// pid is not in it) and pushes its children for the walk.
func (p *Probe) process(pid, pgrp int) (bool, error) {
	p.path = appendPath(p.path[:0], pid, -1, "stat", -1)
	n, err := p.read(true)
	if err != nil {
		return false, err
	}
	state, procPgrp, threads, ok := parseStat(p.buf[:n])
	if !ok {
		return false, fmt.Errorf("parse /proc/%d/stat: %q", pid, p.buf[:n])
	}
	// Most processes have one thread, whose tid is the pid: listing the task
	// directory would cost them a directory read for nothing. A zombie
	// leader with live threads is the exception: its threads have other tids.
	p.tids = append(p.tids[:0], pid)
	if threads != 1 || state == 'Z' {
		if err := p.listTasks(pid); err != nil {
			return false, err
		}
	}
	check := pgrp == 0 || procPgrp == pgrp
	for _, tid := range p.tids {
		if check {
			waiting, err := p.taskWaiting(pid, tid)
			if err != nil && !gone(err) && !denied(err) {
				return false, err
			}
			if waiting {
				return true, nil
			}
		}
		// A child forked by a thread other than the leader is listed only
		// under that thread.
		err := p.pushChildren(pid, tid)
		if err != nil && denied(err) {
			// The children are found by their parent, for all threads at
			// once.
			return false, p.pushChildrenByParent(pid)
		}
		if err != nil && !gone(err) {
			return false, err
		}
	}
	return false, nil
}

// taskWaiting tells whether one task is blocked reading the input.
func (p *Probe) taskWaiting(pid, tid int) (bool, error) {
	p.path = appendPath(p.path[:0], pid, tid, "syscall", -1)
	n, err := p.read(true)
	if err != nil {
		return false, err
	}
	nr, ok := parseSyscall(p.buf[:n], &p.args)
	if !ok {
		return false, nil
	}
	var reading bool
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_PREAD64, unix.SYS_PREADV, unix.SYS_PREADV2:
		reading, err = p.isInput(pid, tid, int32(p.args[0]))
	case unix.SYS_POLL, unix.SYS_PPOLL:
		reading, err = p.pollWatchesInput(pid, tid, p.args[0], p.args[1])
	case unix.SYS_SELECT, unix.SYS_PSELECT6:
		reading, err = p.selectWatchesInput(pid, tid, p.args[0], p.args[1])
	case unix.SYS_EPOLL_WAIT, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2:
		reading, err = p.epollWatchesInput(pid, tid, int32(p.args[0]))
	}
	if !reading || err != nil {
		return false, err
	}
	// A task stopped by a signal while it was reading (Ctrl-Z, SIGSTOP,
	// SIGTTIN) still shows the read as its system call: the kernel keeps the
	// number to restart it on SIGCONT. Only a sleeping task is waiting. The
	// state is read after the system call so that a task continued in
	// between counts: it is back in the read.
	p.path = appendPath(p.path[:0], pid, tid, "stat", -1)
	if n, err = p.read(true); err != nil {
		return false, err
	}
	state, _, _, ok := parseStat(p.buf[:n])
	return ok && state == 'S', nil
}

// isInput tells whether fd of the task is the input.
func (p *Probe) isInput(pid, tid int, fd int32) (bool, error) {
	if fd < 0 {
		return false, nil
	}
	p.link = appendPath(p.link[:0], pid, tid, "fd/", int(fd))
	if err := p.stat(p.link); err != nil {
		if errors.Is(err, unix.ENOENT) {
			// Closed, or the task exited, since its system call was read:
			// either way it is not reading the input.
			return false, nil
		}
		return false, err
	}
	if p.st.Dev == p.dev && p.st.Ino == p.ino {
		return true, nil
	}
	return p.master != nil && p.st.Mode&unix.S_IFMT == unix.S_IFCHR && p.st.Rdev == devTTY, nil
}

// pollWatchesInput tells whether the pollfd array of a task blocked in poll
// or ppoll asks for the input's readability. The array stays in the task's
// memory, unchanged, while the call sleeps.
func (p *Probe) pollWatchesInput(pid, tid int, addr, nfds uint64) (bool, error) {
	nfds = min(nfds, maxWatched)
	for done := uint64(0); done < nfds; {
		chunk := min(nfds-done, uint64(len(p.buf)/pollfdSize))
		b, err := p.peek(tid, addr+done*pollfdSize, p.buf[:chunk*pollfdSize])
		if err != nil || len(b) < pollfdSize {
			return false, err
		}
		done += uint64(len(b) / pollfdSize)
		for ; len(b) >= pollfdSize; b = b[pollfdSize:] {
			fd := int32(binary.NativeEndian.Uint32(b))
			events := binary.NativeEndian.Uint16(b[4:])
			if events&readable == 0 {
				continue
			}
			if in, err := p.isInput(pid, tid, fd); in || err != nil {
				return in, err
			}
		}
	}
	return false, nil
}

// selectWatchesInput tells whether the read set of a task blocked in select
// or pselect6 holds the input.
func (p *Probe) selectWatchesInput(pid, tid int, nfds, addr uint64) (bool, error) {
	if addr == 0 {
		return false, nil
	}
	nfds = min(nfds, maxWatched)
	// fd_set is an array of longs: on little-endian amd64, byte fd/8 holds
	// bit fd%8.
	b, err := p.peek(tid, addr, p.buf[:(nfds+63)/64*8])
	if err != nil {
		return false, err
	}
	for fd := 0; fd < int(nfds) && fd/8 < len(b); fd++ {
		if b[fd/8]&(1<<(fd%8)) == 0 {
			continue
		}
		if in, err := p.isInput(pid, tid, int32(fd)); in || err != nil {
			return in, err
		}
	}
	return false, nil
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

// epollWatchesInput tells whether the epoll instance a task is blocked on
// watches the input for reading. Its fdinfo has a line per watched file,
//
//	tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:18
//
// with the file's inode and its superblock's device, so the file is
// identified without trusting that tfd still names it. The file is streamed
// through buf: an epoll set can be large, its lines are short.
func (p *Probe) epollWatchesInput(pid, tid int, epfd int32) (bool, error) {
	if epfd < 0 {
		return false, nil
	}
	p.path = appendPath(p.path[:0], pid, tid, "fdinfo/", int(epfd))
	fd, err := p.open(p.path, unix.O_RDONLY)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	kept := 0
	for {
		n, err := unix.Read(fd, p.buf[kept:])
		if err != nil {
			return false, pathErr("read", p.path, err)
		}
		data := p.buf[:kept+n]
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if in, err := p.epollEntryIsInput(pid, tid, data[:i]); in || err != nil {
				return in, err
			}
			data = data[i+1:]
		}
		// A full buffer without a newline cannot happen with the kernel's
		// short lines; it would read as the end, never as a false match.
		if n == 0 {
			return false, nil
		}
		kept = copy(p.buf, data)
	}
}

func (p *Probe) epollEntryIsInput(pid, tid int, line []byte) (bool, error) {
	tfd, events, ino, sdev, ok := parseEpollEntry(line)
	if !ok || events&readable == 0 {
		return false, nil
	}
	// sdev is the kernel's internal dev_t: 12 bits of major, 20 of minor.
	dev := unix.Mkdev(uint32(sdev>>20), uint32(sdev&(1<<20-1)))
	if dev == p.dev && ino == p.ino {
		return true, nil
	}
	if p.master == nil {
		return false, nil
	}
	// /dev/tty has its own inode whatever terminal it stands for, so only
	// its device number tells it; tfd is trusted once it names that inode.
	p.link = appendPath(p.link[:0], pid, tid, "fd/", int(tfd))
	if err := p.stat(p.link); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return p.st.Dev == dev && p.st.Ino == ino && p.st.Mode&unix.S_IFMT == unix.S_IFCHR && p.st.Rdev == devTTY, nil
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
