package launcherwindows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/pty"
	"golang.org/x/sys/windows"
)

var (
	modkernel32                   = windows.NewLazySystemDLL("kernel32.dll")
	procUpdateProcThreadAttribute = modkernel32.NewProc("UpdateProcThreadAttribute")
)

// procThreadAttributeJobList is PROC_THREAD_ATTRIBUTE_JOB_LIST
// (ProcThreadAttributeValue(13, FALSE, TRUE, FALSE)).
const procThreadAttributeJobList = 0x2000D

// killedExitCode is the exit code TerminateJobObject gives what it ends:
// 128+9, what a shell reports for a process SIGKILL ended.
const killedExitCode = 137

// reapTimeout bounds how long Wait waits for a terminated job to empty.
const reapTimeout = 10 * time.Second

// defaultRows and defaultCols size a console whose size the spec leaves
// out.
const defaultRows, defaultCols = 24, 80

// defaultPathExt is what cmd.exe searches with when PATHEXT is unset.
const defaultPathExt = ".COM;.EXE;.BAT;.CMD"

// spawn creates the session's job and console and starts the command in
// them.
func (b *backend) spawn(spec launcher.Spec, plan *Plan, s *session, token windows.Token, app string) (*process, error) {
	j, err := newJob(plan.Job)
	if err != nil {
		return nil, err
	}
	var console *pty.Console
	if spec.Stdio.Terminal {
		rows, cols := spec.Stdio.Rows, spec.Stdio.Cols
		if rows == 0 || cols == 0 {
			rows, cols = defaultRows, defaultCols
		}
		if console, err = pty.OpenConsole(rows, cols); err != nil {
			return nil, withCleanup(err, j.close())
		}
	}
	pi, err := createProcess(token, app, spec, plan, j, console)
	if err != nil {
		cleanup := j.close()
		if console != nil {
			cleanup = errors.Join(cleanup, console.Close(), console.Master.Close())
		}
		return nil, withCleanup(err, cleanup)
	}
	windows.CloseHandle(pi.Thread)
	p := &process{
		b: b, s: s, pid: int(pi.ProcessId), proc: pi.Process, job: j, console: console,
		enforcement: &sandboxdv1.EnforcementReport{Backend: BackendName, MechanismSet: MechanismSet, Fields: plan.Report, DenialSources: DenialSources()},
	}
	if console != nil {
		p.terminal = console.Master
	}
	return p, nil
}

// createProcess starts app as the restricted token, in job j from its
// first instruction, on the sandbox desktop, with the plan's environment
// and, for a pipe session, exactly the three stdio handles inherited.
func createProcess(token windows.Token, app string, spec launcher.Spec, plan *Plan, j *job, console *pty.Console) (*windows.ProcessInformation, error) {
	app16, err := windows.UTF16PtrFromString(app)
	if err != nil {
		return nil, fmt.Errorf("command %q: %w", app, err)
	}
	// CreateProcess may write into the command line: its own buffer.
	cmdline, err := windows.UTF16FromString(windows.ComposeCommandLine(spec.Argv))
	if err != nil {
		return nil, fmt.Errorf("command line: %w", err)
	}
	cwd16, err := windows.UTF16PtrFromString(spec.Cwd)
	if err != nil {
		return nil, fmt.Errorf("working directory %q: %w", spec.Cwd, err)
	}
	desktop16, err := windows.UTF16PtrFromString(plan.Desktop)
	if err != nil {
		return nil, fmt.Errorf("desktop %q: %w", plan.Desktop, err)
	}
	env, err := envBlock(plan.Env)
	if err != nil {
		return nil, err
	}
	attrs, err := windows.NewProcThreadAttributeList(2)
	if err != nil {
		return nil, fmt.Errorf("NewProcThreadAttributeList: %w", err)
	}
	defer attrs.Delete()
	// The attribute list lives outside the Go heap and points into it.
	var pin runtime.Pinner
	defer pin.Unpin()
	jobs := []windows.Handle{j.h}
	pin.Pin(&jobs[0])
	if err := attrs.Update(procThreadAttributeJobList, unsafe.Pointer(&jobs[0]), unsafe.Sizeof(jobs[0])); err != nil {
		return nil, fmt.Errorf("PROC_THREAD_ATTRIBUTE_JOB_LIST: %w", err)
	}
	si := &windows.StartupInfoEx{}
	si.Cb = uint32(unsafe.Sizeof(*si))
	si.Desktop = desktop16
	// Always: without it CreateProcess copies the daemon's own standard
	// handles into a console process.
	si.Flags = windows.STARTF_USESTDHANDLES
	flags := uint32(windows.CREATE_UNICODE_ENVIRONMENT | windows.EXTENDED_STARTUPINFO_PRESENT)
	inherit := false
	if console != nil {
		// Null standard handles: the process connects them to the
		// pseudoconsole. The HPCON is the attribute's value itself.
		if r, _, e := procUpdateProcThreadAttribute.Call(uintptr(unsafe.Pointer(attrs.List())), 0,
			windows.PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, uintptr(console.Handle), unsafe.Sizeof(console.Handle), 0, 0); r == 0 {
			return nil, fmt.Errorf("PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE: %w", e)
		}
	} else {
		stdio, err := inheritableStdio(spec.Stdio)
		if err != nil {
			return nil, err
		}
		defer func() {
			for _, h := range stdio {
				windows.CloseHandle(h)
			}
		}()
		pin.Pin(&stdio[0])
		if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&stdio[0]), uintptr(len(stdio))*unsafe.Sizeof(stdio[0])); err != nil {
			return nil, fmt.Errorf("PROC_THREAD_ATTRIBUTE_HANDLE_LIST: %w", err)
		}
		si.StdInput, si.StdOutput, si.StdErr = stdio[0], stdio[1], stdio[2]
		inherit = true
		// A console of its own, without a window: console programs get
		// one anyway, and the desktop is nobody's to see.
		flags |= windows.CREATE_NO_WINDOW
	}
	si.ProcThreadAttributeList = attrs.List()
	pi := &windows.ProcessInformation{}
	err = windows.CreateProcessAsUser(token, app16, &cmdline[0], nil, nil, inherit, flags, &env[0], cwd16, &si.StartupInfo, pi)
	runtime.KeepAlive(cmdline)
	runtime.KeepAlive(env)
	if err != nil {
		return nil, createError(app, spec.Cwd, err)
	}
	return pi, nil
}

// createError is CreateProcessAsUser's failure as the exec error it is
// when the command or the working directory is the cause.
func createError(app, cwd string, err error) error {
	switch {
	case errors.Is(err, windows.ERROR_FILE_NOT_FOUND), errors.Is(err, windows.ERROR_PATH_NOT_FOUND):
		return &launcher.ExecError{Op: "execve", Path: app, Errno: errnoOf(err)}
	case errors.Is(err, windows.ERROR_DIRECTORY):
		return &launcher.ExecError{Op: "chdir", Path: cwd, Errno: errnoOf(err)}
	case errors.Is(err, windows.ERROR_ACCESS_DENIED), errors.Is(err, windows.ERROR_BAD_EXE_FORMAT),
		errors.Is(err, windows.ERROR_EXE_MACHINE_TYPE_MISMATCH):
		return &launcher.ExecError{Op: "execve", Path: app, Errno: errnoOf(err), Hint: "CreateProcessAsUser cannot start it"}
	}
	return fmt.Errorf("CreateProcessAsUser(%s): %w", app, err)
}

// envBlock is env as CreateProcess takes it: each "name=value" ended by
// a NUL, and the block by another.
func envBlock(env []string) ([]uint16, error) {
	var b []uint16
	for _, kv := range env {
		u, err := windows.UTF16FromString(kv)
		if err != nil {
			return nil, fmt.Errorf("environment entry %q: %w", kv, err)
		}
		b = append(b, u...)
	}
	if len(env) == 0 {
		b = append(b, 0)
	}
	return append(b, 0), nil
}

// inheritableStdio is an inheritable duplicate of each of the session's
// stdio files, NUL for one that is missing. The caller closes them.
func inheritableStdio(st launcher.Stdio) ([]windows.Handle, error) {
	out := make([]windows.Handle, 0, 3)
	for _, f := range []*os.File{st.Stdin, st.Stdout, st.Stderr} {
		h, err := inheritableDup(f)
		if err != nil {
			for _, o := range out {
				windows.CloseHandle(o)
			}
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func inheritableDup(f *os.File) (windows.Handle, error) {
	if f == nil {
		nul, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return 0, fmt.Errorf("open %s for a missing stdio stream: %w", os.DevNull, err)
		}
		defer nul.Close()
		f = nul
	}
	// Through SyscallConn: Fd would take a pollable file out of the
	// runtime's poller for good.
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("stdio %s: %w", f.Name(), err)
	}
	var dup windows.Handle
	var derr error
	err = rc.Control(func(fd uintptr) {
		self := windows.CurrentProcess()
		derr = windows.DuplicateHandle(self, windows.Handle(fd), self, &dup, 0, true, windows.DUPLICATE_SAME_ACCESS)
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return 0, fmt.Errorf("duplicate stdio %s: %w", f.Name(), err)
	}
	return dup, nil
}

// envValue is the value of variable name in env, compared regardless of
// case as Windows does.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// candidates are the files argv0 may name: itself when it has an
// extension, and it with each extension of PATHEXT.
func candidates(p string, exts []string) []string {
	var out []string
	if filepath.Ext(p) != "" {
		out = append(out, p)
	}
	for _, e := range exts {
		out = append(out, p+e)
	}
	return out
}

// resolveCommand finds the file argv0 names, as the sandbox would: a
// path is taken relative to the working directory, a bare name is looked
// up in the PATH of the command's own environment (the daemon's is not
// the sandbox's, and CreateProcess would search the daemon's), with the
// extensions of its PATHEXT. Relative PATH entries are skipped, as is the
// implicit current directory CreateProcess would search first: a file
// planted in the working directory is not run by a bare name. A file the
// sandbox may not read and execute is passed over, as execvp does, and
// reported when nothing else is found.
func resolveCommand(token windows.Token, argv0, cwd string, env []string) (string, error) {
	if argv0 == "" {
		return "", &launcher.ExecError{Op: "execve", Path: argv0, Errno: syscall.ENOENT}
	}
	ext := envValue(env, "PATHEXT")
	if ext == "" {
		ext = defaultPathExt
	}
	var exts []string
	for e := range strings.SplitSeq(ext, ";") {
		if e != "" {
			exts = append(exts, e)
		}
	}
	var files []string
	path := envValue(env, "PATH")
	if strings.ContainsAny(argv0, `\/:`) {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		files = candidates(p, exts)
	} else {
		for _, d := range filepath.SplitList(path) {
			if filepath.IsAbs(d) {
				files = append(files, candidates(filepath.Join(d, argv0), exts)...)
			}
		}
	}
	var refused *launcher.ExecError
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			if refused == nil {
				refused = &launcher.ExecError{Op: "execve", Path: f, Errno: windows.ERROR_ACCESS_DENIED, Hint: "it is a directory"}
			}
			continue
		}
		var openErr error
		if err := asSandbox(token, func() error {
			openErr = openAs(f, windows.FILE_READ_DATA|windows.FILE_EXECUTE|windows.SYNCHRONIZE, 0)
			return nil
		}); err != nil {
			return "", err
		}
		if openErr == nil {
			return f, nil
		}
		if refused == nil {
			refused = &launcher.ExecError{Op: "execve", Path: f, Errno: errnoOf(openErr),
				Hint: "the sandbox may not read and execute it: a filesystem.deny path, or the host's ACLs"}
		}
	}
	if refused != nil {
		return "", refused
	}
	if strings.ContainsAny(argv0, `\/:`) {
		return "", &launcher.ExecError{Op: "execve", Path: argv0, Errno: syscall.ENOENT}
	}
	return "", &launcher.ExecError{Op: "execve", Path: argv0, Errno: syscall.ENOENT, Hint: "not found in the command's PATH " + path}
}

// checkCwd returns the error of starting in dir, nil when the sandbox
// can.
func checkCwd(token windows.Token, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: syscall.ENOENT}
	case err != nil:
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: errnoOf(err)}
	case !fi.IsDir():
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: syscall.ENOTDIR}
	}
	var openErr error
	if err := asSandbox(token, func() error {
		openErr = openAs(dir, windows.FILE_TRAVERSE|windows.SYNCHRONIZE, windows.FILE_FLAG_BACKUP_SEMANTICS)
		return nil
	}); err != nil {
		return err
	}
	if openErr != nil {
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: errnoOf(openErr), Hint: "the sandbox may not enter it: a filesystem.deny path, or the host's ACLs"}
	}
	return nil
}

// openAs opens path with access and closes it again: the access check is
// the point.
func openAs(path string, access, flags uint32) error {
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(p16, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, flags, 0)
	if err != nil {
		return err
	}
	return windows.CloseHandle(h)
}

// process is a started sandbox.
type process struct {
	b           *backend
	s           *session
	pid         int
	proc        windows.Handle
	job         *job
	console     *pty.Console
	terminal    *os.File
	enforcement *sandboxdv1.EnforcementReport

	// termSignal is the signal that ended the command, set when the
	// daemon terminated the job while the command still ran.
	termSignal atomic.Int32

	// mu guards released: once Wait has released the job, nothing may
	// use its handle.
	mu       sync.RWMutex
	released bool

	waitOnce sync.Once
	status   launcher.Status
	waitErr  error
}

func (p *process) Pid() int { return p.pid }

func (p *process) Enforcement() *sandboxdv1.EnforcementReport { return p.enforcement }

func (p *process) Terminal() *os.File { return p.terminal }

// Signal delivers sig the ways Windows has: SIGKILL and SIGTERM end the
// whole job at once (Windows has no polite termination request for
// console programs started without a console group of their own), and
// SIGINT in a PTY session is ^C typed on the console.
func (p *process) Signal(sig syscall.Signal) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.released {
		return os.ErrProcessDone
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM:
		return p.terminate(sig)
	case syscall.SIGINT:
		if p.console != nil {
			return p.console.Interrupt()
		}
	}
	return fmt.Errorf("signal %d to a Windows sandbox: %w", int(sig), errors.ErrUnsupported)
}

func (p *process) Kill() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.released {
		return nil
	}
	return p.terminate(syscall.SIGKILL)
}

// terminate ends the job; p.mu is held. The signal is what Status
// reports only if the command was still running: one that already
// exited keeps its own exit code.
func (p *process) terminate(sig syscall.Signal) error {
	if ev, err := windows.WaitForSingleObject(p.proc, 0); err == nil && ev == uint32(windows.WAIT_TIMEOUT) {
		p.termSignal.CompareAndSwap(0, int32(sig))
	}
	return p.job.terminate(killedExitCode)
}

func (p *process) Wait() (launcher.Status, error) {
	p.waitOnce.Do(func() {
		var errs []error
		if _, err := windows.WaitForSingleObject(p.proc, windows.INFINITE); err != nil {
			errs = append(errs, fmt.Errorf("wait for process %d: %w", p.pid, err))
		}
		var code uint32
		if err := windows.GetExitCodeProcess(p.proc, &code); err != nil {
			errs = append(errs, fmt.Errorf("exit code of process %d: %w", p.pid, err))
			p.status = launcher.Status{Signal: syscall.SIGKILL}
		} else if sig := syscall.Signal(p.termSignal.Load()); sig != 0 && code == killedExitCode {
			p.status = launcher.Status{Signal: sig}
		} else {
			p.status = launcher.Status{ExitCode: int(code)}
		}
		if p.job.overMemory.Load() {
			p.status = launcher.Status{Signal: syscall.SIGKILL, Limit: "limits.memory_bytes"}
		}
		// The command has ended, and with it the sandbox: what it left
		// running is killed, as the end of a pid namespace's init would.
		errs = append(errs, p.job.terminate(killedExitCode), p.job.waitEmpty(reapTimeout))
		p.mu.Lock()
		p.released = true
		p.mu.Unlock()
		if p.console != nil {
			errs = append(errs, p.console.Close())
		}
		errs = append(errs, p.job.close())
		if err := windows.CloseHandle(p.proc); err != nil {
			errs = append(errs, fmt.Errorf("close process %d: %w", p.pid, err))
		}
		errs = append(errs, p.b.release(p.s))
		p.waitErr = errors.Join(errs...)
	})
	return p.status, p.waitErr
}
