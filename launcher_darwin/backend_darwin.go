//go:build darwin

package launcherdarwin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/pty"
	"golang.org/x/sys/unix"
)

const (
	sandboxExecPath = "/usr/bin/sandbox-exec"
	// probeCommand is what the probes run under a profile: it needs
	// nothing but to be executed.
	probeCommand = "/usr/bin/true"
	// pollInterval is how often a running session's processes are looked
	// up: a process that leaves the session's process groups and loses its
	// parent within one interval escapes the tracker.
	pollInterval = 100 * time.Millisecond
	// reapTimeout bounds how long Wait waits for SIGKILL to take effect.
	reapTimeout = 10 * time.Second
	// denialGrace is how long a session's violations are still routed to
	// it after Wait: the kernel's reports reach the log stream later than
	// the refused call returns.
	denialGrace = 2 * time.Second
	// szomb is the p_stat of a process that has exited and waits to be
	// reaped (sys/proc.h).
	szomb = 5
)

// Config configures the macOS backend.
type Config struct {
	// SandboxUID and SandboxGID are the identity root callers' sandboxes
	// run as; the profile probe runs as it when the daemon is root. Zero
	// means the daemon's own.
	SandboxUID, SandboxGID uint32
	// GuardPath is the binary started as the sessions' guard; it must
	// call RunGuardIfRequested. Empty means this binary.
	GuardPath string
}

type backend struct {
	host  *Host
	log   *logStream
	procs *procWatch
	guard *guard
}

// New probes the host and returns the macOS backend. A host where
// Seatbelt does not work still gets a backend: it refuses every Start with
// the reason, and Capabilities says why.
func New(cfg Config) (launcher.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	guardPath := cfg.GuardPath
	if guardPath == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("darwin backend: the daemon's own binary, to guard sessions with: %w", err)
		}
		guardPath = self
	}
	h := probeHost(ctx, cfg)
	return &backend{host: h, log: newLogStream(h.Get(ProbeLog)), procs: &procWatch{members: map[*process]bool{}}, guard: newGuard(guardPath)}, nil
}

func (b *backend) Name() string { return BackendName }

// Needs says the backend needs nothing of the daemon.
func (b *backend) Needs() launcher.Needs { return needs }

func (b *backend) Capabilities() *sandboxdv1.CapabilitiesReport {
	h := *b.host
	h.Probes = slices.Clone(h.Probes)
	for i, r := range h.Probes {
		if r.Name == ProbeLog && r.OK {
			h.Probes[i].OK, h.Probes[i].Detail = b.log.state()
		}
	}
	return CapabilitiesOf(&h)
}

func probeHost(ctx context.Context, cfg Config) *Host {
	h := &Host{EUID: os.Geteuid(), Kernel: kernelName()}
	// stat is the probe of a tool that only has to be there.
	stat := func(name, path string) ProbeResult {
		r := ProbeResult{Name: name, Op: "stat " + path}
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			r.Errno, r.Detail = errnoOf(err), err.Error()
		case fi.Mode().Perm()&0o111 == 0:
			r.Errno, r.Detail = syscall.EACCES, path+" is not executable"
		default:
			r.OK = true
		}
		return r
	}

	if r := stat(ProbeSandboxExec, sandboxExecPath); !r.OK {
		h.Probes = append(h.Probes, r)
	} else {
		h.Probes = append(h.Probes, runProbe(ctx, ProbeSandboxExec, `"(version 1)(allow default)"`, []string{"-p", "(version 1)(allow default)"}, nil))
	}
	if h.Get(ProbeSandboxExec).OK {
		h.Probes = append(h.Probes, probeProfiles(ctx, cfg))
	}
	h.Probes = append(h.Probes, stat(ProbeLog, logToolPath))
	return h
}

// probeProfiles runs what Start runs, with profiles that use every
// construct the planner writes, as the identity sandboxes run as: a macOS
// release that does not know an operation or filter refuses the whole
// profile, and that must be found out here rather than as the exit status
// of every command.
func probeProfiles(ctx context.Context, cfg Config) ProbeResult {
	full := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Read:      sandboxdv1.Filesystem_LISTED,
			ReadRoots: []string{"/usr/local"},
			Write:     []string{"/private/tmp/sandboxd-probe"},
			ReadOnly:  []string{"/private/tmp/sandboxd-probe/.git"},
			Deny:      []string{"/private/tmp/sandboxd-probe/.env"},
		},
		Network:  &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
		Children: &sandboxdv1.Children{Allow: true},
	}
	host := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_ALL},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 && cfg.SandboxUID != 0 {
		cred = &syscall.Credential{Uid: cfg.SandboxUID, Gid: cfg.SandboxGID, Groups: []uint32{cfg.SandboxGID}}
	}
	for _, tc := range []struct {
		what string
		req  launcher.PlanRequest
		host PlanHost
	}{
		{"read LISTED, write roots, read_only, deny, network NONE, a terminal, a session socket", launcher.PlanRequest{
			Policy: full, SessionID: "probe", Terminal: true,
			SessionSocket: "/private/var/run/sandboxd/sessions/probe.sock", HideSockets: []string{"/private/var/run/sandboxd"},
		}, PlanHost{TerminalPath: "/dev/ttys999"}},
		{"read ALL, network HOST", launcher.PlanRequest{Policy: host, SessionID: "probe", HideSockets: []string{"/private/var/run/sandboxd"}}, PlanHost{}},
	} {
		plan, err := NewPlan(tc.req, tc.host)
		if err != nil {
			return ProbeResult{Name: ProbeProfile, Op: "plan a profile of " + tc.what, Detail: err.Error()}
		}
		if r := runProbe(ctx, ProbeProfile, "<the profile of "+tc.what+">", plan.Args(), cred); !r.OK {
			return r
		}
	}
	return ProbeResult{Name: ProbeProfile, OK: true, Op: sandboxExecPath + " -p <the planned profiles> -- " + probeCommand}
}

// runProbe runs probeCommand under sandbox-exec with args; shown is how
// the profile is named in the report.
func runProbe(ctx context.Context, name, shown string, args []string, cred *syscall.Credential) ProbeResult {
	r := ProbeResult{Name: name, Op: sandboxExecPath + " -p " + shown + " -- " + probeCommand}
	if cred != nil {
		r.Op += fmt.Sprintf(" as uid %d gid %d", cred.Uid, cred.Gid)
	}
	cmd := exec.CommandContext(ctx, sandboxExecPath, slices.Concat(args, []string{"--", probeCommand})...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		r.OK = true
		return r
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		r.Errno = errno
	}
	r.Detail = strings.TrimSpace(err.Error() + ": " + strings.TrimSpace(stderr.String()))
	return r
}

func kernelName() string {
	product, _ := unix.Sysctl("kern.osproductversion")
	release, _ := unix.Sysctl("kern.osrelease")
	return strings.TrimSpace(fmt.Sprintf("macOS %s (Darwin %s)", product, release))
}

func (b *backend) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	if spec.UID == 0 || spec.GID == 0 {
		return nil, errors.New("refusing to start a sandbox as host root (uid or gid 0)")
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	if !filepath.IsAbs(spec.Cwd) {
		return nil, fmt.Errorf("working directory %q is not an absolute path", spec.Cwd)
	}
	if spec.SessionSocket != "" && !filepath.IsAbs(spec.SessionSocket) {
		// The profile names it by path, and the sandbox reaches it from
		// its own working directory.
		return nil, fmt.Errorf("session socket %q is not an absolute path", spec.SessionSocket)
	}
	if u := b.host.Refusal(); u != nil {
		return nil, u
	}
	root := os.Geteuid() == 0
	id, err := sandboxIdentity(root, spec.UID, spec.GID)
	if err != nil {
		return nil, err
	}

	var master, replica *os.File
	closeTerminal := func() {
		if master != nil {
			master.Close()
			replica.Close()
		}
	}
	host := PlanHost{Resolve: resolveExisting}
	if spec.Stdio.Terminal {
		if master, replica, err = openTerminal(spec, root); err != nil {
			return nil, err
		}
		host.TerminalPath = replica.Name()
	}
	plan, err := NewPlan(spec.PlanRequest(), host)
	if err != nil {
		closeTerminal()
		return nil, err
	}
	check := execCheck{plan: plan, id: id, resolve: resolveExisting}
	if e := check.cwd(spec.Cwd); e != nil {
		closeTerminal()
		return nil, e
	}
	if e := check.command(spec.Argv[0], spec.Cwd, spec.Env); e != nil {
		closeTerminal()
		return nil, e
	}

	// Registered before the command starts, so that its first refusal
	// already has somewhere to go.
	sources, release := b.log.register(ctx, spec.SessionID, plan, spec.OnDenial)
	if err := ctx.Err(); err != nil {
		release(0)
		closeTerminal()
		return nil, fmt.Errorf("sandbox start abandoned: %w", err)
	}

	env := spec.Env
	if env == nil {
		// exec.Cmd gives a nil Env the daemon's own environment.
		env = []string{}
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	if root {
		sys.Credential = &syscall.Credential{Uid: spec.UID, Gid: spec.GID, Groups: []uint32{spec.GID}}
	}
	cmd := &exec.Cmd{
		Path: sandboxExecPath,
		// "--" ends sandbox-exec's options, so no argv[0] is read as one.
		Args:        slices.Concat([]string{sandboxExecPath}, plan.Args(), []string{"--"}, spec.Argv),
		Env:         env,
		Dir:         spec.Cwd,
		SysProcAttr: sys,
	}
	if replica != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = replica, replica, replica
		// The terminal is fd 0 of the new session's leader.
		sys.Setctty, sys.Ctty = true, 0
	} else {
		// A nil *os.File in the interface would not be nil to exec.Cmd;
		// a missing stream is /dev/null.
		if f := spec.Stdio.Stdin; f != nil {
			cmd.Stdin = f
		}
		if f := spec.Stdio.Stdout; f != nil {
			cmd.Stdout = f
		}
		if f := spec.Stdio.Stderr; f != nil {
			cmd.Stderr = f
		}
	}
	if err := cmd.Start(); err != nil {
		release(0)
		closeTerminal()
		return nil, fmt.Errorf("start %s for %q: %w", sandboxExecPath, spec.Argv[0], err)
	}
	if replica != nil {
		// The session's processes hold the terminal now; the daemon's copy
		// would keep the master from seeing their end.
		replica.Close()
	}
	p := &process{
		b: b, cmd: cmd, pid: cmd.Process.Pid, terminal: master, tracker: NewTracker(cmd.Process.Pid), release: release,
		enforcement: &sandboxdv1.EnforcementReport{Backend: BackendName, MechanismSet: MechanismSet, Fields: plan.Report, DenialSources: sources},
	}
	// The first snapshot fixes the leader's start time while it cannot
	// have been reaped yet.
	if snap, err := snapshot(); err == nil {
		p.update(snap)
	}
	// Without the guard the sandbox would outlive a daemon that dies.
	if err := b.guard.add(p.pid, p.tracker.members[p.pid].Start); err != nil {
		_ = unix.Kill(-p.pid, unix.SIGKILL)
		_ = cmd.Wait()
		release(0)
		if master != nil {
			master.Close()
		}
		return nil, err
	}
	b.procs.add(p)
	return p, nil
}

// sandboxIdentity is who the command runs as. A root daemon switches to
// uid and gid with gid as the only group; any other daemon can only run
// sandboxes as itself, with its own groups.
func sandboxIdentity(root bool, uid, gid uint32) (identity, error) {
	if root {
		return identity{uid: uid, gids: []uint32{gid}}, nil
	}
	euid, egid := uint32(os.Geteuid()), uint32(os.Getegid())
	if uid != euid || gid != egid {
		return identity{}, &launcher.Unenforceable{
			Field:     "process",
			Mechanism: fmt.Sprintf("running as uid %d gid %d", uid, gid),
			Found:     fmt.Sprintf("the daemon runs as uid %d gid %d, not root, and cannot switch identity", euid, egid),
			Remedy:    "call the daemon as the user it runs as, or run sandboxd as root",
		}
	}
	groups, err := os.Getgroups()
	if err != nil {
		return identity{}, fmt.Errorf("read the daemon's groups: %w", err)
	}
	id := identity{uid: uid, gids: []uint32{gid}}
	for _, g := range groups {
		id.gids = append(id.gids, uint32(g))
	}
	return id, nil
}

// openTerminal allocates a PTY session's terminal at its initial size. A
// root daemon hands the replica to the sandbox identity, as login does:
// the command has it open already, but reopening its tty by name is
// common (ttyname, /dev/tty-less programs) and must work too.
func openTerminal(spec launcher.Spec, root bool) (master, replica *os.File, err error) {
	master, replica, err = pty.Open()
	if err != nil {
		return nil, nil, err
	}
	if spec.Stdio.Rows > 0 && spec.Stdio.Cols > 0 {
		err = pty.Resize(master, spec.Stdio.Rows, spec.Stdio.Cols)
	}
	if err == nil && root {
		if err = replica.Chown(int(spec.UID), -1); err != nil {
			err = fmt.Errorf("give the terminal %s to uid %d: %w", replica.Name(), spec.UID, err)
		}
	}
	if err != nil {
		master.Close()
		replica.Close()
		return nil, nil, err
	}
	return master, replica, nil
}

// snapshot reads the host's process table. Zombies are left out: they
// have ended, and their parent (launchd, once a member is killed) reaps
// them.
func snapshot() ([]Proc, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("read the process table (kern.proc.all): %w", err)
	}
	out := make([]Proc, 0, len(kps))
	for i := range kps {
		k := &kps[i]
		if k.Proc.P_stat == szomb {
			continue
		}
		out = append(out, Proc{
			Pid: int(k.Proc.P_pid), Ppid: int(k.Eproc.Ppid), Pgid: int(k.Eproc.Pgid),
			Start: int64(k.Proc.P_starttime.Sec)*1e6 + int64(k.Proc.P_starttime.Usec),
		})
	}
	return out, nil
}

// procWatch follows the processes of every running session with one
// snapshot of the process table per interval, however many sessions run:
// a daemonized child is caught while its parent still lives.
type procWatch struct {
	mu      sync.Mutex
	members map[*process]bool
	running bool
}

func (w *procWatch) add(p *process) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members[p] = true
	if !w.running {
		w.running = true
		go w.loop()
	}
}

func (w *procWatch) remove(p *process) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.members, p)
}

// loop ends when no session is left to follow; the next add starts it
// again.
func (w *procWatch) loop() {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.members) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		ps := make([]*process, 0, len(w.members))
		for p := range w.members {
			ps = append(ps, p)
		}
		w.mu.Unlock()
		snap, err := snapshot()
		if err != nil {
			continue
		}
		for _, p := range ps {
			p.update(snap)
		}
	}
}

type process struct {
	b           *backend
	cmd         *exec.Cmd
	pid         int
	terminal    *os.File
	enforcement *sandboxdv1.EnforcementReport
	release     func(grace time.Duration)

	mu      sync.Mutex
	tracker *Tracker
	waited  bool

	waitOnce sync.Once
	status   launcher.Status
	waitErr  error
}

func (p *process) update(snap []Proc) []Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.Update(snap)
}

func (p *process) Pid() int { return p.pid }

func (p *process) Enforcement() *sandboxdv1.EnforcementReport { return p.enforcement }

func (p *process) Terminal() *os.File { return p.terminal }

// Signal delivers sig to the leader's process group: the command and
// whatever it started without a group of its own, as a terminal's
// signals would.
func (p *process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Once reaped, the leader's pid may name someone else's group.
	if p.waited {
		return os.ErrProcessDone
	}
	if err := unix.Kill(-p.pid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("signal %d to process group %d: %w", int(sig), p.pid, err)
	}
	return nil
}

func (p *process) Kill() error {
	snap, err := snapshot()
	if err != nil {
		return err
	}
	return killAll(p.update(snap))
}

// killAll sends SIGKILL to the process group of every member, which also
// catches what a member forked since the snapshot, and to every member.
// The daemon's own group and pid are never among them (the session leader
// started a session of its own); they are skipped regardless, as a
// malformed snapshot must not make the daemon kill itself.
func killAll(members []Proc) error {
	self, selfGroup := os.Getpid(), unix.Getpgrp()
	var errs []error
	kill := func(pid int) {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	groups := map[int]bool{}
	for _, m := range members {
		if m.Pgid > 1 && m.Pgid != selfGroup && !groups[m.Pgid] {
			groups[m.Pgid] = true
			kill(-m.Pgid)
		}
	}
	for _, m := range members {
		if m.Pid > 1 && m.Pid != self {
			kill(m.Pid)
		}
	}
	return errors.Join(errs...)
}

func (p *process) Wait() (launcher.Status, error) {
	p.waitOnce.Do(func() {
		werr := p.cmd.Wait()
		p.mu.Lock()
		p.waited = true
		p.mu.Unlock()
		var exitErr *exec.ExitError
		if werr != nil && !errors.As(werr, &exitErr) {
			p.waitErr = werr
		}
		p.status = statusOf(p.cmd.ProcessState)
		// The command has ended; like the end of a pid namespace's init,
		// that ends the sandbox.
		if err := p.reap(); err != nil && p.waitErr == nil {
			p.waitErr = err
		}
		p.b.guard.remove(p.pid)
		p.b.procs.remove(p)
		p.release(denialGrace)
	})
	return p.status, p.waitErr
}

// reap kills the session's remaining processes until none is left.
func (p *process) reap() error {
	deadline := time.Now().Add(reapTimeout)
	for {
		snap, err := snapshot()
		if err != nil {
			return err
		}
		members := p.update(snap)
		if len(members) == 0 {
			return nil
		}
		kerr := killAll(members)
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("processes of the sandbox survive SIGKILL after %v: %v", reapTimeout, members), kerr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statusOf(ps *os.ProcessState) launcher.Status {
	if ps == nil {
		return launcher.Status{Signal: syscall.SIGKILL}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return launcher.Status{Signal: ws.Signal()}
	}
	return launcher.Status{ExitCode: ps.ExitCode()}
}
