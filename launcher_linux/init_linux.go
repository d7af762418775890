package launcherlinux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/pty"
	"golang.org/x/sys/unix"
)

const (
	initArg0 = "sandboxd-init"
	execArg0 = "sandboxd-exec"
	// Both stages get their plan on fd 3 and report on fd 4; a PTY
	// session's init sends the terminal's master on fd 5.
	planFd     = 3
	reportFd   = 4
	terminalFd = 5
)

// message is one JSON line from a stage to its parent.
type message struct {
	Type   string `json:"type"` // setup-error, exec-error, started, exit
	Field  string `json:"field,omitempty"`
	Op     string `json:"op,omitempty"`
	Path   string `json:"path,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Detail string `json:"detail,omitempty"`
	Code   int    `json:"code,omitempty"`
	Signal int    `json:"signal,omitempty"`
}

// RunInitIfRequested turns this process into a sandbox stage when it was
// started as one, and never returns in that case. Every binary that embeds
// the backend (sandboxd, and test binaries that start sandboxes) calls it
// first thing in main or TestMain.
func RunInitIfRequested() {
	switch os.Args[0] {
	case initArg0:
		runInit()
	case execArg0:
		runExec()
	}
}

func send(w *os.File, m message) {
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
	report := os.NewFile(reportFd, "report")
	var plan Plan
	if err := json.NewDecoder(os.NewFile(planFd, "plan")).Decode(&plan); err != nil {
		send(report, message{Type: "setup-error", Field: "process", Op: "read plan", Detail: err.Error()})
		os.Exit(1)
	}
	setupErr := func(field, op, path string, err error) {
		send(report, message{Type: "setup-error", Field: field, Op: op, Path: path, Errno: errnoOf(err), Detail: err.Error()})
		os.Exit(1)
	}
	// Not dumpable: the command, though the same host uid, must not open
	// /proc/1/exe (the daemon binary) or ptrace the init.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		setupErr("process", "prctl(PR_SET_DUMPABLE)", "", err)
	}
	if err := setupRoot(plan.Mounts); err != nil {
		var se *stepError
		if errors.As(err, &se) {
			setupErr(se.Field, se.Op, se.Path, se.Err)
		}
		setupErr("process", "setup root", "", err)
	}
	if plan.NetNS {
		if err := loopbackUp(); err != nil {
			setupErr("network.mode", "loopback up", "lo", err)
		}
	}
	if err := unix.Sethostname([]byte(plan.Hostname)); err != nil {
		setupErr("process", "sethostname", plan.Hostname, err)
	}
	stdio := []uintptr{0, 1, 2}
	if plan.Exec.Terminal {
		replica, err := openTerminal(plan.Exec.Rows, plan.Exec.Cols)
		if err != nil {
			setupErr("process", "allocate terminal", "/dev/ptmx", err)
		}
		fd := replica.Fd()
		stdio = []uintptr{fd, fd, fd}
	}
	pid, err := startExecStage(&plan.Exec, stdio, report)
	if err != nil {
		os.Exit(1)
	}
	send(report, message{Type: "started"})
	st := reapUntil(pid)
	m := message{Type: "exit"}
	if st.Signaled() {
		m.Signal = int(st.Signal())
	} else {
		m.Code = st.ExitStatus()
	}
	send(report, m)
	os.Exit(0)
}

// startExecStage starts the second stage in a nested user namespace whose
// only uid is the sandbox uid, so the command owns no capability in the
// namespace that owns the mounts. It returns once the command was exec'd.
func startExecStage(p *ExecPlan, stdio []uintptr, report *os.File) (int, error) {
	planR, planW, err := os.Pipe()
	if err != nil {
		send(report, message{Type: "setup-error", Field: "process", Op: "pipe", Detail: err.Error()})
		return 0, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		send(report, message{Type: "setup-error", Field: "process", Op: "pipe", Detail: err.Error()})
		return 0, err
	}
	attr := &syscall.ProcAttr{
		Env:   []string{},
		Files: append(stdio, planR.Fd(), statW.Fd()),
		Sys: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(p.UID), HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(p.GID), HostID: 0, Size: 1}},
			Setsid:      true,
			Setctty:     p.Terminal,
			Ctty:        0,
		},
	}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{execArg0}, attr)
	planR.Close()
	statW.Close()
	if err != nil {
		send(report, message{Type: "setup-error", Field: "process", Op: "start exec stage", Errno: errnoOf(err), Detail: err.Error()})
		return 0, err
	}
	if err := json.NewEncoder(planW).Encode(p); err != nil {
		send(report, message{Type: "setup-error", Field: "process", Op: "send exec plan", Detail: err.Error()})
		return 0, err
	}
	planW.Close()
	// The report fd is close-on-exec: EOF with no message means execve
	// succeeded.
	var m message
	derr := json.NewDecoder(statR).Decode(&m)
	statR.Close()
	if derr == nil {
		send(report, m)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
		return 0, fmt.Errorf("%s: %s", m.Op, m.Detail)
	}
	return pid, nil
}

// openTerminal allocates a terminal in the sandbox's own devpts, so the
// command's tty name resolves inside the sandbox and no host terminal is
// reachable from it, and sends the master to the daemon.
func openTerminal(rows, cols uint16) (*os.File, error) {
	master, replica, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer master.Close()
	if rows != 0 || cols != 0 {
		if err := pty.Resize(master, rows, cols); err != nil {
			return nil, err
		}
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return nil, err
	}
	var sendErr error
	err = rc.Control(func(fd uintptr) {
		sendErr = unix.Sendmsg(terminalFd, []byte{0}, unix.UnixRights(int(fd)), nil, 0)
	})
	if err == nil {
		err = sendErr
	}
	if err != nil {
		return nil, fmt.Errorf("send terminal to daemon: %w", err)
	}
	unix.Close(terminalFd)
	return replica, nil
}

// reapUntil forwards signals to the command's process group and reaps every
// child until the command itself has exited. The init then exits, and the
// kernel kills whatever else is left in the pid namespace.
func reapUntil(pid int) unix.WaitStatus {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT, unix.SIGALRM)
	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
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

func runExec() {
	// Landlock and no_new_privs apply to this thread only, and it is this
	// thread that calls execve.
	runtime.LockOSThread()
	report := os.NewFile(reportFd, "report")
	unix.CloseOnExec(reportFd)
	fail := func(typ, op, path string, err error) {
		send(report, message{Type: typ, Field: "process", Op: op, Path: path, Errno: errnoOf(err), Detail: err.Error()})
		os.Exit(1)
	}
	var p ExecPlan
	if err := json.NewDecoder(os.NewFile(planFd, "plan")).Decode(&p); err != nil {
		fail("setup-error", "read exec plan", "", err)
	}
	unix.Close(planFd)
	if err := unix.Chdir(p.Cwd); err != nil {
		fail("exec-error", "chdir", p.Cwd, err)
	}
	path, err := lookPath(p.Argv[0], p.Env)
	if err != nil {
		fail("exec-error", "execve", p.Argv[0], err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail("setup-error", "prctl(PR_SET_NO_NEW_PRIVS)", "", err)
	}
	if err := applyLandlock(p.Landlock); err != nil {
		fail("setup-error", "landlock", "", err)
	}
	if err := applySeccomp(p.Seccomp); err != nil {
		fail("setup-error", "seccomp", "", err)
	}
	err = unix.Exec(path, p.Argv, p.Env)
	fail("exec-error", "execve", path, err)
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
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, argv0)
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
