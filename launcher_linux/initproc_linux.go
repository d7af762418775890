package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/launcher"
	"golang.org/x/sys/unix"
)

// initKey is what a sandbox init is cloned with: everything about it that
// cannot change once it runs. Two plans with one key can use each other's
// inits.
type initKey struct {
	uid, gid   uint32
	namespaces bool
	netns      bool
}

func keyOf(plan *Plan, uid, gid uint32) initKey {
	return initKey{uid: uid, gid: gid, namespaces: plan.Namespaces, netns: plan.NetNS}
}

// initProc is a started sandbox init waiting for its plan: it has its
// namespaces, and nothing of any session yet.
type initProc struct {
	proc *initHandle
	// plan is where the init reads its plan, report where it writes what
	// happened, pass the socket on which the daemon sends it the session's
	// stdio and it sends back the fds the daemon must hold.
	plan, report, pass *os.File
	// mounts is the host's mount generation when the init was cloned: its
	// mount namespace is a copy of the host's as it was then.
	mounts  uint64
	started time.Time
}

// startInit has sp clone a sandbox init for key. Its stdio is /dev/null: a
// session's arrives with the plan.
//
// The init's ends of its pipes and socket stay raw fds, and the daemon's
// end of the plan pipe a blocking file: only what the daemon waits on (the
// report and the pass socket) goes into the runtime's poller, since
// registering an fd there and removing it again costs two epoll_ctl calls,
// and an os.Pipe makes both ends non-blocking for the Fd that hands them
// to the spawner to make blocking again.
func startInit(sp *spawner, key initKey, mounts uint64) (*initProc, error) {
	var planFds, repFds [2]int
	if err := unix.Pipe2(planFds[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("plan pipe: %w", err)
	}
	defer unix.Close(planFds[0])
	planW := os.NewFile(uintptr(planFds[1]), "plan")
	if err := unix.Pipe2(repFds[:], unix.O_CLOEXEC); err != nil {
		planW.Close()
		return nil, fmt.Errorf("report pipe: %w", err)
	}
	defer unix.Close(repFds[1])
	repR, err := pollable(repFds[0], "report")
	if err != nil {
		planW.Close()
		return nil, fmt.Errorf("report pipe: %w", err)
	}
	passParent, passChild, err := passSocket()
	if err != nil {
		planW.Close()
		repR.Close()
		return nil, err
	}
	defer unix.Close(passChild)
	proc, err := sp.spawn(key, [3]int{planFds[0], repFds[1], passChild})
	if err != nil {
		planW.Close()
		repR.Close()
		passParent.Close()
		return nil, spawnFailure(err, key)
	}
	return &initProc{proc: proc, plan: planW, report: repR, pass: passParent, mounts: mounts, started: time.Now()}, nil
}

// pollable makes fd non-blocking and a file of the runtime's poller, so
// that a goroutine waiting on it parks instead of holding a thread in a
// blocking call, which the scheduler hands its processor away from and
// its monitor, polling every 20 us while calls block, watches for.
func pollable(fd int, name string) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// shrinkPipe makes f's pipe one page long, for a pipe that carries a few
// bytes for the rest of a session: the kernel keeps a ring of sixteen
// buffer slots for a pipe of the default length, a 1 KiB allocation of
// unreclaimable memory, and one slot for a page (about 0.8 KiB less per
// pipe, measured over 2,000 pipes). It fails only while more than a page
// is unread, and a pipe left as it was costs memory, not correctness.
func shrinkPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.FcntlInt(fd, unix.F_SETPIPE_SZ, os.Getpagesize())
		})
	}
}

// passAdvice says what to do when an fd could not be passed over a socket
// with errno: ETOOMANYREFS counts the fds in flight of the sender's user
// against its RLIMIT_NOFILE; ENOMEM and ENOBUFS are the host's memory.
func passAdvice(errno syscall.Errno) string {
	if errno == unix.ETOOMANYREFS {
		return "too many fds in flight: raise the daemon's LimitNOFILE, or end sessions"
	}
	return "the host is short of memory: free some, or end sessions"
}

// spawnFailure says why the spawner could not start an init for key.
func spawnFailure(err error, key initKey) error {
	var se *spawnError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.stage == spawnStageReply && (se.errno == unix.ETOOMANYREFS || se.errno == unix.ENOMEM || se.errno == unix.ENOBUFS):
		// The init ran, but its pidfd could not reach the daemon.
		return fmt.Errorf("start sandbox init: the spawner could not pass the init's pidfd, and killed it: %w (%s): %w", launcher.ErrHostResources, passAdvice(se.errno), err)
	case se.stage == spawnStageReply:
		// Not the host's resources (an LSM refusing the pass, say): no
		// advice would be true.
		return fmt.Errorf("start sandbox init: the spawner could not pass the init's pidfd, and killed it: %w", err)
	case se.errno == unix.EMFILE || se.errno == unix.ENFILE || se.errno == unix.EAGAIN || se.errno == unix.ENOMEM:
		// Out of fds, tasks or memory: blaming the namespaces would send
		// the operator after the wrong setting.
		return fmt.Errorf("start sandbox init: %w (raise the daemon's LimitNOFILE or TasksMax, or end sessions): %w", launcher.ErrHostResources, err)
	}
	if !key.namespaces {
		return identityRefusal(err, key.uid)
	}
	return namespaceRefusal(err, key.netns)
}

// discard kills an init that will get no plan and reaps it.
func (ip *initProc) discard() {
	ip.plan.Close()
	ip.report.Close()
	ip.pass.Close()
	ip.proc.signal(unix.SIGKILL)
	ip.proc.wait()
}

// initPool keeps a few inits started ahead for the keys in use, so that a
// launch does not wait for namespaces to be created and the init to
// start. An init is used only while the host's mounts are as they were when
// it was cloned, and a key nobody launched with for poolIdle has its inits
// stopped.
type initPool struct {
	spawner *spawner
	size    int
	mounts  *mountWatch

	mu    sync.Mutex
	ready map[initKey][]*initProc
	// filling is the keys a goroutine is refilling; lastTake when each
	// key was last asked for.
	filling  map[initKey]bool
	lastTake map[initKey]time.Time
	janitor  bool
}

const poolIdle = time.Minute

func newInitPool(initPath string, size int) *initPool {
	mounts := watchMounts()
	if mounts == nil {
		// Without the watch no init started ahead can be known to be
		// current.
		size = 0
	}
	return &initPool{
		spawner: newSpawner(initPath), size: size, mounts: mounts,
		ready: map[initKey][]*initProc{}, filling: map[initKey]bool{}, lastTake: map[initKey]time.Time{},
	}
}

// take returns a started init for key: one of the pool's when it has a
// current one, else a new one. The launch calls refill once it is through
// its setup.
func (p *initPool) take(key initKey) (*initProc, error) {
	gen := p.mounts.generation()
	p.mu.Lock()
	var got *initProc
	var stale []*initProc
	for q := p.ready[key]; len(q) > 0 && got == nil; q = p.ready[key] {
		ip := q[0]
		p.ready[key] = q[1:]
		if ip.mounts == gen {
			got = ip
		} else {
			stale = append(stale, ip)
		}
	}
	p.lastTake[key] = time.Now()
	p.mu.Unlock()
	if len(stale) > 0 {
		// Killing and reaping them is no part of this launch.
		go func() {
			for _, ip := range stale {
				ip.discard()
			}
		}()
	}
	if got != nil {
		return got, nil
	}
	return startInit(p.spawner, key, gen)
}

// refill tops key up behind a launch that took one of its inits, once the
// launch's own init has built its sandbox (or failed to): cloning the next
// one meanwhile would compete with it for the host's mount and network
// locks (copying a mount namespace and mounting in one both hold the
// kernel's namespace_sem) as well as for a processor.
func (p *initPool) refill(key initKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refillLocked(key)
}

// refillLocked starts a goroutine topping key up, unless one is running;
// p.mu is held.
func (p *initPool) refillLocked(key initKey) {
	if p.size <= 0 || p.filling[key] {
		return
	}
	p.filling[key] = true
	go p.fill(key)
	if !p.janitor {
		p.janitor = true
		go p.sweep()
	}
}

func (p *initPool) fill(key initKey) {
	for {
		p.mu.Lock()
		if len(p.ready[key]) >= p.size || time.Since(p.lastTake[key]) > poolIdle {
			p.filling[key] = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		ip, err := startInit(p.spawner, key, p.mounts.generation())
		p.mu.Lock()
		if err != nil {
			// Start reports the refusal when it starts one itself.
			p.filling[key] = false
			p.mu.Unlock()
			return
		}
		p.ready[key] = append(p.ready[key], ip)
		p.mu.Unlock()
	}
}

// sweep stops the inits of keys nobody asked for lately, and the ones the
// host's mounts have moved on from; it ends when the pool is empty.
func (p *initPool) sweep() {
	for {
		time.Sleep(poolIdle / 4)
		gen := p.mounts.generation()
		var drop []*initProc
		p.mu.Lock()
		for key, q := range p.ready {
			idle := time.Since(p.lastTake[key]) > poolIdle
			var keep []*initProc
			for _, ip := range q {
				if idle || ip.mounts != gen {
					drop = append(drop, ip)
				} else {
					keep = append(keep, ip)
				}
			}
			if len(keep) == 0 {
				delete(p.ready, key)
			} else {
				p.ready[key] = keep
			}
		}
		done := len(p.ready) == 0
		if done {
			p.janitor = false
		}
		p.mu.Unlock()
		for _, ip := range drop {
			ip.discard()
		}
		if done {
			return
		}
	}
}

// mountWatch counts the changes to the daemon's mount table: the kernel
// flags /proc/self/mountinfo with POLLPRI on each (proc(5)).
type mountWatch struct {
	mu  sync.Mutex
	gen uint64
}

func watchMounts() *mountWatch {
	// A raw fd, not an *os.File: the runtime's poller would register the
	// file with its epoll, and each poll of it there consumes the change
	// this one is waiting to see.
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	w := &mountWatch{}
	go w.run(fd)
	return w
}

func (w *mountWatch) run(fd int) {
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != syscall.EINTR {
			return
		}
		// Each poll that reports the change also clears it.
		if fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 {
			w.mu.Lock()
			w.gen++
			w.mu.Unlock()
		}
	}
}

func (w *mountWatch) generation() uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}
