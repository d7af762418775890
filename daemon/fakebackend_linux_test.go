package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/pty"
)

// fakeBackend starts plain, unconfined processes. It exists to exercise the
// daemon's session plumbing; enforcement is the conformance suite's job.
type fakeBackend struct {
	mu     sync.Mutex
	refuse *launcher.Unenforceable
	specs  []launcher.Spec
	// gate, when set, is called with each spec and Start's context
	// before Start starts anything: a test holds a launch in STARTING by
	// blocking in it, and fails the launch with what it returns.
	gate func(context.Context, launcher.Spec) error
	// killGate, when set, is called as the Kill of a process started
	// after begins: a test makes a kill slow by blocking in it.
	killGate func()
}

func (b *fakeBackend) Name() string { return "fake" }

func (b *fakeBackend) Capabilities() *sandboxdv1.CapabilitiesReport {
	return &sandboxdv1.CapabilitiesReport{Backend: "fake"}
}

func (b *fakeBackend) lastSpec() launcher.Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.specs[len(b.specs)-1]
}

func (b *fakeBackend) allSpecs() []launcher.Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]launcher.Spec(nil), b.specs...)
}

func (b *fakeBackend) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	b.mu.Lock()
	b.specs = append(b.specs, spec)
	refuse, gate, killGate := b.refuse, b.gate, b.killGate
	b.mu.Unlock()
	if gate != nil {
		if err := gate(ctx, spec); err != nil {
			return nil, err
		}
	}
	if refuse != nil {
		return nil, refuse
	}
	stdin, stdout, stderr := spec.Stdio.Stdin, spec.Stdio.Stdout, spec.Stdio.Stderr
	var master *os.File
	if spec.Stdio.Terminal {
		m, replica, err := pty.Open()
		if err != nil {
			return nil, err
		}
		defer replica.Close()
		if spec.Stdio.Rows != 0 || spec.Stdio.Cols != 0 {
			if err := pty.Resize(m, spec.Stdio.Rows, spec.Stdio.Cols); err != nil {
				m.Close()
				return nil, err
			}
		}
		master, stdin, stdout, stderr = m, replica, replica, replica
	}
	cmd := &exec.Cmd{
		Path:   spec.Argv[0],
		Args:   spec.Argv,
		Env:    spec.Env,
		Dir:    spec.Cwd,
		Stdin:  stdin,
		Stdout: stdout,
		Stderr: stderr,
		// A session of its own, so Kill can end the whole group, and the
		// terminal as controlling terminal like a real backend does.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: spec.Stdio.Terminal},
	}
	if err := cmd.Start(); err != nil {
		if master != nil {
			master.Close()
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return nil, &launcher.ExecError{Path: spec.Argv[0], Errno: errno}
		}
		return nil, err
	}
	return &fakeProcess{cmd: cmd, master: master, killGate: killGate}, nil
}

// fakeMechanismSet is what every fake sandbox reports it runs under, which
// the daemon passes on as a child's launcher.Spec.ParentMechanismSet.
const fakeMechanismSet = "fake-set"

type fakeProcess struct {
	cmd      *exec.Cmd
	master   *os.File
	killGate func()
	mu       sync.Mutex
	waited   bool
}

func (p *fakeProcess) Pid() int { return p.cmd.Process.Pid }

func (p *fakeProcess) Terminal() *os.File { return p.master }

func (p *fakeProcess) Enforcement() *sandboxdv1.EnforcementReport {
	return &sandboxdv1.EnforcementReport{Backend: "fake", MechanismSet: fakeMechanismSet}
}

func (p *fakeProcess) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waited {
		return errors.New("fake: process already waited")
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

func (p *fakeProcess) Kill() error {
	if p.killGate != nil {
		p.killGate()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waited {
		return errors.New("fake: process already waited")
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *fakeProcess) Wait() (launcher.Status, error) {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.waited = true
	p.mu.Unlock()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return launcher.Status{}, err
	}
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return launcher.Status{Signal: ws.Signal()}, nil
	}
	return launcher.Status{ExitCode: ws.ExitStatus()}, nil
}
