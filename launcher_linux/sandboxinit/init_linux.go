package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Arg0 is the argv[0] that makes a process a sandbox init.
const Arg0 = "sandboxd-init"

// UsernsArg0 is the argv[0] of a process that only holds the user
// namespace it was cloned into until its stdin closes: the daemon opens
// that namespace to ID-map write roots with, and a namespace needs a
// process to be made.
const UsernsArg0 = "sandboxd-userns"

const (
	// The init gets its plan on fd 3 and reports on fd 4. On fd 5, a unix
	// socket, it hands the daemon what the daemon must hold (SCM_RIGHTS):
	// a PTY session's terminal master, then the seccomp listener of the
	// command's filter and the sandbox's root directory, from which the
	// daemon resolves the paths the command passes.
	planFd   = 3
	reportFd = 4
	passFd   = 5
)

// The tag byte that comes with each fd on passFd.
const (
	PassTerminal = 'T'
	PassListener = 'N'
	PassRootDir  = 'R'
	// PassCgroup comes from the daemon, after the stdio: the tasks files
	// of the session's cgroup v1 leaves, into which the thread that forks
	// the command moves itself (ExecPlan.CgroupTasks).
	PassCgroup = 'C'
	// PassProxy is the listening socket in the sandbox's network
	// namespace that the daemon serves its allowlist proxy on.
	PassProxy = 'P'
	// PassDiag is a NETLINK_SOCK_DIAG socket made in the sandbox's network
	// namespace, after the root directory, when the sandbox has one: with
	// it the daemon tells a unix socket the sandbox listens on from any
	// other, as only the sandbox's own are in its namespace.
	PassDiag = 'D'
	// PassForward is a listener on the sandbox's 127.0.0.1 at a port of
	// Plan.LoopbackForwards, one each, in that order, after PassProxy.
	PassForward = 'F'
	// PassMount comes from the daemon, first of all: an ID-mapped clone
	// of a write root (MountStep.Idmapped), one message each.
	PassMount = 'M'
	// PassStdio comes the other way, from the daemon with a pipe
	// session's stdin, stdout and stderr, before the plan: an init is
	// started before the session it will serve is known.
	PassStdio = 'S'
)

// Message is one JSON line from the init to the daemon.
type Message struct {
	Type   string `json:"type"` // setup-error, exec-error, started, exit
	Field  string `json:"field,omitempty"`
	Op     string `json:"op,omitempty"`
	Path   string `json:"path,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Blocker is, for a path the command could not use, the directory
	// on its way that stops the sandbox uid: the path itself or an
	// ancestor it may not search.
	Blocker string `json:"blocker,omitempty"`
	Code    int    `json:"code,omitempty"`
	Signal  int    `json:"signal,omitempty"`
}

// init runs before main, and before the packages that sort after this
// one and that it does not import (protobuf, gRPC) are initialized: a
// sandbox init started from the daemon's binary reaches runInit without
// paying for their setup, which is most of a Go start of that binary.
func init() {
	if len(os.Args) > 0 && os.Args[0] == Arg0 {
		runInit()
	}
	if len(os.Args) > 0 && os.Args[0] == UsernsArg0 {
		holdUserns()
	}
}

// holdUserns waits for its stdin to reach its end, then exits.
func holdUserns() {
	buf := make([]byte, 1)
	for {
		n, err := unix.Read(0, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n <= 0 {
			os.Exit(0)
		}
	}
}

func send(w *os.File, m Message) {
	b, _ := json.Marshal(m)
	w.Write(append(b, '\n'))
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
}

func runInit() {
	// Caught from the start: a signal the daemon forwards while the sandbox
	// is still being built must wait for the command, not end the init by
	// its default action.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append(forwardedSignals, SigKillAll)...)
	// No fd of the init reaches the command but its stdio: the report pipe
	// would let it forge its own exit status, and whatever the daemon
	// inherited without close-on-exec is none of the sandbox's business.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		os.Exit(1)
	}
	report := os.NewFile(reportFd, "report")
	var plan Plan
	if err := json.NewDecoder(os.NewFile(planFd, "plan")).Decode(&plan); err != nil {
		send(report, Message{Type: "setup-error", Field: "process", Op: "read plan", Detail: err.Error()})
		os.Exit(1)
	}
	setupErr := func(field, op, path string, err error) {
		send(report, Message{Type: "setup-error", Field: field, Op: op, Path: path, Errno: errnoOf(err), Detail: err.Error()})
		os.Exit(1)
	}
	// Not dumpable: the command, though the same host uid, must not open
	// /proc/1/exe (the daemon binary) or ptrace the init.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		setupErr("process", "prctl(PR_SET_DUMPABLE)", "", err)
	}
	if plan.Namespaces {
		if err := setupRoot(plan.Mounts); err != nil {
			var se *stepError
			if errors.As(err, &se) {
				setupErr(se.Field, se.Op, se.Path, se.Err)
			}
			setupErr("process", "setup root", "", err)
		}
		if plan.NetNS {
			if err := LoopbackUp(); err != nil {
				setupErr("network.mode", "loopback up", "lo", err)
			}
		}
		if plan.ProxyListen != "" {
			// Made here, so that it is in the sandbox's network
			// namespace; the daemon accepts on it from outside.
			if err := passListener(PassProxy, plan.ProxyListen); err != nil {
				setupErr("network.allow", "listen for the proxy", plan.ProxyListen, err)
			}
			for _, port := range plan.LoopbackForwards {
				addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port).String()
				if err := passListener(PassForward, addr); err != nil {
					setupErr("network.allow", "listen to forward to the host's loopback", addr, err)
				}
			}
		}
		if err := unix.Sethostname([]byte(plan.Hostname)); err != nil {
			setupErr("process", "sethostname", plan.Hostname, err)
		}
	} else if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		// Without a pid namespace, being the subreaper is what keeps every
		// descendant within reach of the final kill.
		setupErr("process", "prctl(PR_SET_CHILD_SUBREAPER)", "", err)
	}
	var stdio []uintptr
	if !plan.Exec.Terminal {
		fds, err := receiveStdio()
		if err != nil {
			setupErr("process", "receive stdio from daemon", "", err)
		}
		stdio = fds
	} else {
		replica, err := openTerminal(plan.Exec.Rows, plan.Exec.Cols)
		if err != nil {
			setupErr("process", "allocate terminal", "/dev/ptmx", err)
		}
		fd := replica.Fd()
		stdio = []uintptr{fd, fd, fd}
		if plan.Exec.TerminalRule {
			plan.Exec.Landlock.Rules = append(plan.Exec.Landlock.Rules, LandlockRule{Path: replica.Name(), Access: (LLReadFile | LLWriteFile | LLIoctlDev) & plan.Exec.Landlock.HandledFS})
		}
	}
	var cgroupTasks []int
	if plan.Exec.CgroupTasks > 0 {
		fds, err := receiveFds(PassCgroup, plan.Exec.CgroupTasks)
		if err != nil {
			setupErr("limits", "receive cgroup files from daemon", "", err)
		}
		cgroupTasks = fds
	}
	pid, listener, err := startCommand(&plan.Exec, stdio, cgroupTasks, plan.Namespaces)
	for _, fd := range cgroupTasks {
		unix.Close(fd)
	}
	if err != nil {
		var ee *commandError
		if errors.As(err, &ee) {
			field := ee.field
			if field == "" {
				field = "process"
			}
			send(report, Message{Type: ee.typ, Field: field, Op: ee.op, Path: ee.path, Blocker: ee.blocker, Errno: errnoOf(ee.err), Detail: ee.err.Error()})
		} else {
			send(report, Message{Type: "setup-error", Field: "process", Op: "start command", Errno: errnoOf(err), Detail: err.Error()})
		}
		os.Exit(1)
	}
	if !plan.Exec.Terminal {
		// The command has them now; the init holding them too would
		// keep the daemon from seeing their end when the command's
		// processes close them.
		for _, fd := range stdio {
			unix.Close(int(fd))
		}
	}
	if listener >= 0 {
		// Not kept: with the daemon's copy the only one, its closing ends
		// every notification still pending.
		err := passToDaemon(PassListener, listener)
		unix.Close(listener)
		if err != nil {
			setupErr("process", "send seccomp listener to daemon", "", err)
		}
		// The command's root is the init's: nothing in the sandbox may
		// chroot or pivot_root. Sent rather than opened by the daemon as
		// /proc/PID/root, as the init may be gone by the time it would.
		if err := passRoot(); err != nil {
			setupErr("process", "send root directory to daemon", "/", err)
		}
		if plan.NetNS {
			if err := passDiag(); err != nil {
				setupErr("network.mode", "send a sock_diag socket to daemon", "", err)
			}
		}
	}
	unix.Close(passFd)
	send(report, Message{Type: "started"})
	// From here the init only waits, for as long as the session lasts:
	// what setup allocated goes back to the kernel, once the session has
	// shown it is not one of the many that end at once (the collection it
	// takes would be most of their init's work).
	time.AfterFunc(time.Second, debug.FreeOSMemory)
	st := reapUntil(pid, sigs)
	if !plan.Namespaces {
		killDescendants()
	}
	m := Message{Type: "exit"}
	if st.Signaled() {
		m.Signal = int(st.Signal())
	} else {
		m.Code = st.ExitStatus()
	}
	send(report, m)
	os.Exit(0)
}

// commandError is a failure to start the command: "setup-error" when a
// restriction could not be applied, "exec-error" when the command itself
// could not be run.
type commandError struct {
	typ, op, path string
	// field is the policy field at fault, "" for process; blocker is as
	// in Message.
	field, blocker string
	err            error
}

func (e *commandError) Error() string { return fmt.Sprintf("%s %s: %v", e.op, e.path, e.err) }

// startCommand forks the command from a thread of its own that first sheds
// every capability and restricts itself: no_new_privs, Landlock and seccomp
// all act on the calling thread, and a forked child inherits that thread's
// state. The goroutine never unlocks the thread, so the runtime destroys it
// afterwards instead of reusing it. listener is the seccomp listener when
// the plan asks for one, -1 otherwise.
func startCommand(p *ExecPlan, stdio []uintptr, cgroupTasks []int, namespaces bool) (pid, listener int, err error) {
	type result struct {
		pid, listener int
		err           error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		pid, listener, err := restrictAndFork(p, stdio, cgroupTasks, namespaces)
		done <- result{pid, listener, err}
	}()
	r := <-done
	return r.pid, r.listener, r.err
}

func restrictAndFork(p *ExecPlan, stdio []uintptr, cgroupTasks []int, namespaces bool) (int, int, error) {
	setup := func(op string, err error) error {
		return &commandError{typ: "setup-error", op: op, err: err}
	}
	// This thread alone joins the session's limits, and the command
	// forked from it starts there; the init's other threads stay out, so
	// they neither count against pids.max nor leave the init unable to
	// start a thread when the command has used them all up.
	for _, fd := range cgroupTasks {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return 0, -1, &commandError{typ: "setup-error", op: "join the session's cgroup", err: err}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, -1, setup("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	if err := dropCapabilities(!namespaces); err != nil {
		return 0, -1, setup("drop capabilities", err)
	}
	// Checked as the command will be: without capabilities.
	for _, w := range p.WriteRoots {
		if blocker, err := inaccessible(w, true); err != nil {
			return 0, -1, &commandError{typ: "setup-error", field: "filesystem.write", op: "access", path: w, blocker: blocker, err: err}
		}
	}
	if blocker, err := inaccessible(p.Cwd, false); err != nil {
		return 0, -1, &commandError{typ: "exec-error", op: "chdir", path: p.Cwd, blocker: blocker, err: err}
	}
	path, err := lookPath(p.Argv[0], p.Env)
	if err != nil {
		return 0, -1, &commandError{typ: "exec-error", op: "execve", path: p.Argv[0], err: err}
	}
	if err := ApplyLandlock(p.Landlock); err != nil {
		return 0, -1, setup("landlock", err)
	}
	// The command's working directory is set here, on this thread alone
	// (its own fs struct), for the child to inherit: once the filter is
	// on, a chdir in the child would wait for the daemon, which does not
	// hold the listener yet.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return 0, -1, setup("unshare(CLONE_FS)", err)
	}
	if err := unix.Chdir(p.Cwd); err != nil {
		return 0, -1, &commandError{typ: "exec-error", op: "chdir", path: p.Cwd, err: err}
	}
	// From here until the daemon holds the listener, this thread and any
	// the runtime starts from it (which inherit the filter) must make no
	// call the filter notifies: nothing would answer it. The fork and exec
	// below make none, nor does what the init does until it has sent the
	// listener (sendmsg, close, an O_PATH open); the command's own calls
	// wait for the daemon, which they may.
	listener, err := ApplySeccomp(p.Seccomp, p.Listener)
	if err != nil {
		return 0, -1, setup("seccomp", err)
	}
	pid, err := syscall.ForkExec(path, p.Argv, &syscall.ProcAttr{
		Env:   p.Env,
		Files: stdio,
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: p.Terminal, Ctty: 0},
	})
	if err != nil {
		if listener >= 0 {
			unix.Close(listener)
		}
		return 0, -1, &commandError{typ: "exec-error", op: "execve", path: path, err: err}
	}
	return pid, listener, nil
}

// inaccessible says why the calling thread, by its real ids, cannot use
// name: search it (a directory) and, with write, create and remove names
// in it or write it (a file). blocker is where the walk from the root
// stopped, name or an ancestor that may not be searched. Every ancestor
// is tried by itself because the kernel's refusal does not say which one
// it was.
func inaccessible(name string, write bool) (blocker string, err error) {
	dir := "/"
	for _, c := range strings.Split(strings.Trim(path.Clean(name), "/"), "/") {
		if c == "" {
			break
		}
		next := path.Join(dir, c)
		if next == path.Clean(name) {
			break
		}
		if err := unix.Faccessat(unix.AT_FDCWD, next, unix.X_OK, 0); err != nil {
			return next, err
		}
		dir = next
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		return name, err
	}
	mode := uint32(0)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		mode = unix.X_OK
	}
	if write {
		mode |= unix.W_OK
	}
	if mode == 0 {
		return "", nil
	}
	if err := unix.Faccessat(unix.AT_FDCWD, name, mode, 0); err != nil {
		return name, err
	}
	return "", nil
}

// dropCapabilities empties the calling thread's bounding, ambient,
// inheritable, permitted and effective sets, in that order: the bounding
// set needs CAP_SETPCAP, which the last step gives up. A namespace-less
// init never had CAP_SETPCAP (boundingOptional): its bounding set stays,
// which no_new_privs makes moot, as nothing can be gained across execve.
func dropCapabilities(boundingOptional bool) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if boundingOptional && errors.Is(err, unix.EPERM) {
			break
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// openTerminal allocates a terminal in the sandbox's own devpts, so the
// command's tty name resolves inside the sandbox and no host terminal is
// reachable from it, and sends the master to the daemon.
func openTerminal(rows, cols uint16) (*os.File, error) {
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(master, unix.TIOCGPTN)
	if err != nil {
		return nil, fmt.Errorf("TIOCGPTN: %w", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	replica, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if rows != 0 || cols != 0 {
		if err := unix.IoctlSetWinsize(master, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
			replica.Close()
			return nil, fmt.Errorf("resize pty to %dx%d: %w", rows, cols, err)
		}
	}
	if err := passToDaemon(PassTerminal, master); err != nil {
		replica.Close()
		return nil, fmt.Errorf("send terminal to daemon: %w", err)
	}
	return replica, nil
}

// receiveStdio takes the three fds the daemon sent with PassStdio.
func receiveStdio() ([]uintptr, error) {
	fds, err := receiveFds(PassStdio, 3)
	if err != nil {
		return nil, err
	}
	return []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])}, nil
}

// receiveFds takes one message of n fds tagged tag from the daemon.
func receiveFds(tag byte, n int) ([]int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(n*4))
	got, oobn, _, _, err := unix.Recvmsg(passFd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if got != 1 || buf[0] != tag {
		return nil, fmt.Errorf("got %q, want %q", buf[:got], tag)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("bad control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != n {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("want %d fds, got %d: %v", n, len(fds), err)
	}
	return fds, nil
}

func passRoot() error {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	return passToDaemon(PassRootDir, root)
}

func passDiag() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return passToDaemon(PassDiag, fd)
}

// passListener listens on addr, an IPv4 address and port, and hands the
// socket to the daemon, tagged tag. The init keeps no copy: the daemon
// closing its own ends the listener.
func passListener(tag byte, addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("address %q is not IPv4 address:port", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		return fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return passToDaemon(tag, fd)
}

func passToDaemon(tag byte, fd int) error {
	return unix.Sendmsg(passFd, []byte{tag}, unix.UnixRights(fd), nil, 0)
}

// forwardedSignals are the signals the init passes on to the command.
var forwardedSignals = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT, unix.SIGALRM}

// reapUntil forwards signals to the command's process group and reaps every
// child until the command itself has exited. The init then exits, and the
// kernel kills whatever else is left in the pid namespace.
func reapUntil(pid int, sigs <-chan os.Signal) unix.WaitStatus {
	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			if sig == SigKillAll {
				killTree()
				continue
			}
			if unix.Kill(-pid, sig) != nil {
				unix.Kill(pid, sig)
			}
		}
	}()
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ws
		}
		if wpid == pid && (ws.Exited() || ws.Signaled()) {
			return ws
		}
	}
}

// lookPath finds argv0 on the sandbox's PATH (never the daemon's).
func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	var firstErr error = unix.ENOENT
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		p := path.Join(dir, argv0)
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if err := unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS); err != nil {
			if firstErr == unix.ENOENT {
				firstErr = err
			}
			continue
		}
		return p, nil
	}
	return "", firstErr
}

// SigKillAll asks a namespace-less init to kill every process of its
// sandbox. Landlock's signal scope keeps the sandbox from sending it.
const SigKillAll = syscall.Signal(36)

// killTree sends SIGKILL to every descendant of the init. As the child
// subreaper the init inherits every orphan of its tree, so a descendant
// that outlives its parent is still found on the next pass.
func killTree() {
	for _, pid := range descendants(os.Getpid()) {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// killDescendants kills and reaps until the init has no child left.
func killDescendants() {
	for {
		killTree()
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.ECHILD) {
			return
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// descendants lists the processes below pid, parents before children.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		kids := childrenOf(p)
		out = append(out, kids...)
		queue = append(queue, kids...)
	}
	return out
}

// childrenOf reads the children of every thread of pid.
func childrenOf(pid int) []int {
	taskDir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(taskDir)
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(taskDir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
