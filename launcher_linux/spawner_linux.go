package launcherlinux

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/internal/fdwait"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"golang.org/x/sys/unix"
)

// spawner is the daemon's side of the processes that clone the sandbox
// inits (spawner.c in cmd/sandboxd-init), which run on in their clones
// without an execve: cloning one from the daemon with CLONE_NEWUSER is a
// full fork of a large Go program, copying its page tables on every launch;
// a spawner is a few pages. A spawner serves one request at a time, and
// holds it for the clone (most of it the new network namespace) and until
// the clone has taken its identity, so there is one per processor (up to
// maxSpawners), each started on first use and again if it has gone: with
// one, launches from several clients queued behind its clones while
// processors idled. The daemon's ends of their sockets are in the
// runtime's poller, so that the wait for a clone parks the goroutine
// rather than blocking a thread.
type spawner struct {
	initPath string
	lanes    []*spawnLane
	next     atomic.Uint32
}

// spawnLane is one spawner process and the daemon's end of its socket.
type spawnLane struct {
	mu   sync.Mutex
	sock *os.File // nil until started
	rc   syscall.RawConn
}

func newSpawner(initPath string) *spawner {
	s := &spawner{initPath: initPath, lanes: make([]*spawnLane, max(1, min(runtime.NumCPU(), maxSpawners)))}
	for i := range s.lanes {
		s.lanes[i] = &spawnLane{}
	}
	return s
}

// maxSpawners bounds the spawners a large host keeps: clones in parallel
// still meet on the kernel's locks for the namespaces they copy (mounts,
// network devices), and each spawner is a process kept for the daemon's
// life.
const maxSpawners = 4

// lane returns a spawner that serves no request now, or, when every one
// does, the next in turn, locked.
func (s *spawner) lane() *spawnLane {
	for _, l := range s.lanes {
		if l.mu.TryLock() {
			return l
		}
	}
	l := s.lanes[s.next.Add(1)%uint32(len(s.lanes))]
	l.mu.Lock()
	return l
}

// The layout of struct spawn_request and struct spawn_reply (spawn.h).
const (
	spawnNamespaces = 1 << 0
	spawnNetNS      = 1 << 1
	spawnSetIDs     = 1 << 2
	spawnSetgroups  = 1 << 3

	spawnRequestSize = 24
	spawnReplySize   = 16
)

// spawnerTunables turn off the C library's restartable sequences in the
// spawner and so in every init cloned from it: the kernel writes the
// thread's rseq area (its CPU number) on every return to the process,
// which keeps the page holding it, in the thread block, an idle init's
// own rather than the spawner's. With it off the one page an idle init
// writes is the one with its errno and idle stack (see idle_stack in
// cmd/sandboxd-init). Neither uses what rseq speeds up (sched_getcpu), and
// the command gets the environment of its plan, not this.
const spawnerTunables = "GLIBC_TUNABLES=glibc.pthread.rseq=0"

// start starts l's spawner; l.mu is held.
func (l *spawnLane) start(initPath string) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("spawner socketpair: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "spawner")
	defer child.Close()
	// No parent-death signal: it would come when the thread that forked
	// the spawner ends, not the daemon. The spawner exits when the
	// daemon's end of the socket closes, which the kernel does when the
	// daemon dies.
	sock, err := pollable(fds[0], "spawner")
	if err != nil {
		return fmt.Errorf("spawner socket: %w", err)
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		sock.Close()
		return fmt.Errorf("spawner socket: %w", err)
	}
	cmd := &exec.Cmd{Path: initPath, Args: []string{sandboxinit.SpawnerArg0}, Env: []string{spawnerTunables}, ExtraFiles: []*os.File{child}}
	if err := cmd.Start(); err != nil {
		sock.Close()
		return fmt.Errorf("start sandbox init spawner %s: %w", initPath, err)
	}
	go cmd.Wait()
	l.sock, l.rc = sock, rc
	return nil
}

// stop closes the daemon's end of l's socket, on which its spawner exits;
// l.mu is held.
func (l *spawnLane) stop() {
	l.sock.Close()
	l.sock, l.rc = nil, nil
}

// send sends l's spawner req with fds, starting the spawner first when it
// has not been or has gone; l.mu is held. A spawner found gone (it exits
// when the daemon's end closes, or when it cannot send even a reply
// without fds; a reply that cannot pass its init's pidfd, for memory or
// fds in flight, costs only that init, so it was most likely killed) is
// started again,
// once: a send that failed delivered nothing. A request that was delivered
// is never sent again, to this spawner or another: the spawner may have
// cloned an init with its fds before it went, and an init whose parent
// dies before it has set its parent-death signal runs on, so that two
// inits would share one plan pipe, report pipe and pass socket. Another
// failure of the send (memory, the fds in flight) leaves the spawner as it
// is: closing its socket would end it and, by their parent-death signal,
// every session it cloned.
func (l *spawnLane) send(initPath string, req []byte, fds [3]int) error {
	rights := unix.UnixRights(fds[:]...)
	for attempt := 0; ; attempt++ {
		if l.sock == nil {
			if err := l.start(initPath); err != nil {
				return err
			}
		}
		var serr error
		err := l.rc.Write(func(fd uintptr) bool {
			serr = unix.Sendmsg(int(fd), req, rights, nil, unix.MSG_NOSIGNAL)
			return serr != unix.EAGAIN
		})
		if err = cmp.Or(err, serr); err == nil {
			return nil
		}
		gone := errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.ENOTCONN)
		if !gone {
			for _, errno := range []syscall.Errno{unix.ENOMEM, unix.ENOBUFS, unix.ETOOMANYREFS} {
				if errors.Is(err, errno) {
					return fmt.Errorf("%w (%s): %w", err, passAdvice(errno), launcher.ErrHostResources)
				}
			}
			return err
		}
		l.stop()
		if attempt > 0 {
			return err
		}
	}
}

// spawnError is a failed spawn: the stage of spawn.h that failed, and its
// errno.
type spawnError struct {
	stage int
	errno syscall.Errno
}

// spawnStages name the stages of spawn.h, from 1.
var spawnStages = []string{"clone", "identity", "start", "reply"}

// spawnStageReply is the stage of a reply that could not pass the init's
// pidfd: the spawner killed that init and says why without it.
const spawnStageReply = 4

func (e *spawnError) Error() string {
	if e.stage >= 1 && e.stage <= len(spawnStages) {
		return spawnStages[e.stage-1] + ": " + e.errno.Error()
	}
	return e.errno.Error()
}
func (e *spawnError) Unwrap() error { return e.errno }

// spawn starts an init for key with the given plan, report and pass fds
// as its 3, 4 and 5.
func (s *spawner) spawn(key initKey, fds [3]int) (*initHandle, error) {
	req := make([]byte, spawnRequestSize)
	var flags uint32
	root := os.Geteuid() == 0
	pdeathsig := syscall.SIGKILL
	if root {
		// A root daemon drops its supplementary groups (host gid 0
		// among them); that needs setgroups, which an unprivileged
		// daemon does not have and does not need.
		flags |= spawnSetIDs | spawnSetgroups
	}
	var caps uint64
	if key.namespaces {
		flags |= spawnNamespaces
		if key.netns {
			flags |= spawnNetNS
		}
		for _, c := range initCapabilities {
			caps |= 1 << c
		}
	} else {
		// The init kills every descendant on this signal; SIGKILL would
		// leave them, as nothing else encloses them.
		pdeathsig = sandboxinit.SigKillAll
	}
	binary.LittleEndian.PutUint32(req[0:], flags)
	binary.LittleEndian.PutUint32(req[4:], key.uid)
	binary.LittleEndian.PutUint32(req[8:], key.gid)
	binary.LittleEndian.PutUint32(req[12:], uint32(pdeathsig))
	binary.LittleEndian.PutUint64(req[16:], caps)

	l := s.lane()
	defer l.mu.Unlock()
	if err := l.send(s.initPath, req, fds); err != nil {
		return nil, fmt.Errorf("sandbox init spawner: %w", err)
	}
	reply := make([]byte, spawnReplySize)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn, recvflags int
	var serr error
	err := l.rc.Read(func(fd uintptr) bool {
		n, oobn, recvflags, _, serr = unix.Recvmsg(int(fd), reply, oob, unix.MSG_CMSG_CLOEXEC)
		return serr != unix.EAGAIN
	})
	if err = cmp.Or(err, serr); err == nil && n == 0 {
		err = errors.New("spawner closed its socket")
	}
	if err != nil {
		// Gone, or a reply left unread that the next request would
		// take for its own. Not started again for this request: it
		// reached the spawner, and its fds may be in an init by now.
		l.stop()
		return nil, fmt.Errorf("sandbox init spawner: %w", err)
	}
	if n != spawnReplySize {
		return nil, fmt.Errorf("sandbox init spawner: a reply of %d bytes", n)
	}
	if e := binary.LittleEndian.Uint32(reply[0:]); e != 0 {
		return nil, &spawnError{stage: int(binary.LittleEndian.Uint32(reply[4:])), errno: syscall.Errno(e)}
	}
	pid := int(binary.LittleEndian.Uint32(reply[8:]))
	if recvflags&unix.MSG_CTRUNC != 0 {
		closeRights(oob[:oobn])
		return nil, fmt.Errorf("sandbox init spawner: %w", fdsDropped(fmt.Sprintf("the pidfd of init %d", pid)))
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("sandbox init spawner: no pidfd with init %d: %v", pid, err)
	}
	got, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		for _, fd := range got {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("sandbox init spawner: no pidfd with init %d: %v", pid, err)
	}
	return newInitHandle(pid, got[0])
}

// initHandle is a running init, which the spawner, its parent, reaps: the
// daemon signals it and learns of its end through its pidfd.
type initHandle struct {
	pid   int
	pidfd *fdwait.Lazy
	rc    syscall.RawConn
}

// newInitHandle takes pidfd, opened non-blocking, to wait for the init's
// end in the runtime's poller, so that waiting takes no thread. It enters
// the poller only when the wait starts (fdwait.Lazy): until then an idle
// session's pidfd costs the runtime no poll descriptor of 512 bytes, nor
// the kernel an epoll entry; signals need no file.
func newInitHandle(pid, pidfd int) (*initHandle, error) {
	f := fdwait.NewLazy(pidfd, "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pidfd of init %d: %w", pid, err)
	}
	return &initHandle{pid: pid, pidfd: f, rc: rc}, nil
}

// signal sends sig; os.ErrProcessDone once the init has exited.
func (h *initHandle) signal(sig syscall.Signal) error {
	var serr error
	if err := h.rc.Control(func(fd uintptr) {
		serr = unix.PidfdSendSignal(int(fd), sig, nil, 0)
	}); err != nil {
		return os.ErrProcessDone
	}
	if errors.Is(serr, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return serr
}

// waitFor returns once the init has exited or d has passed, keeping its
// pidfd.
func (h *initHandle) waitFor(d time.Duration) {
	h.rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for end := time.Now().Add(d); ; {
			left := time.Until(end)
			if left <= 0 {
				return
			}
			if _, err := unix.Poll(pfd, int(left.Milliseconds())+1); !errors.Is(err, unix.EINTR) {
				return
			}
		}
	})
}

// wait returns once the init has exited, and releases its pidfd.
func (h *initHandle) wait() {
	h.rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return (err != nil && !errors.Is(err, unix.EINTR)) || n > 0
	})
	h.pidfd.Close()
}
