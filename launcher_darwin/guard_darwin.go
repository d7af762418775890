//go:build darwin

package launcherdarwin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// guardEnv makes the daemon's binary a session's guard (RunGuardIfRequested).
const guardEnv = "SANDBOXD_DARWIN_GUARD"

// A session's guard is the daemon's binary again, outside the sandbox and
// in a session of its own, holding the read end of a pipe whose write end
// only the daemon has. macOS has no parent-death signal and no pid
// namespace whose end takes every process with it: when the daemon dies,
// however it dies, the pipe reads end-of-file and the guard kills every
// process of the sandbox, which it follows as the daemon does. The daemon
// closes the pipe itself once it has reaped the session, and the guard,
// finding nothing left, exits.
type guard struct {
	cmd      *exec.Cmd
	lifeline *os.File
}

// startGuard starts the guard of the session whose leader is pid.
func startGuard(path string, pid int) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("session guard: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(path)
	cmd.Env = []string{guardEnv + "=" + strconv.Itoa(pid)}
	// fd 3; the guard's stdio is /dev/null but for its complaints.
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr
	// Its own session: a signal to the daemon's process group (launchd
	// stopping the job) must leave the guard to do its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("session guard %s: %w", path, err)
	}
	return &guard{cmd: cmd, lifeline: w}, nil
}

// stop lets the guard go once the session's processes are gone.
func (g *guard) stop() error {
	g.lifeline.Close()
	if err := g.cmd.Wait(); err != nil {
		return fmt.Errorf("session guard: %w", err)
	}
	return nil
}

// RunGuardIfRequested runs the session guard and exits when the process
// was started as one; it returns at once otherwise. The daemon's main
// calls it first thing.
func RunGuardIfRequested() {
	v, ok := os.LookupEnv(guardEnv)
	if !ok {
		return
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 1 {
		fmt.Fprintf(os.Stderr, "sandboxd session guard: bad %s=%q\n", guardEnv, v)
		os.Exit(2)
	}
	if err := runGuard(pid, os.NewFile(3, "lifeline")); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd session guard of %d: %v\n", pid, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runGuard(pid int, lifeline *os.File) error {
	// Only the lifeline ends the guard: not the terminal hanging up, not
	// a signal meant for the daemon.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	cut := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := lifeline.Read(b[:]); err != nil {
				close(cut)
				return
			}
		}
	}()
	tracker := NewTracker(pid)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if snap, err := snapshot(); err == nil {
			tracker.Update(snap)
		}
		select {
		case <-cut:
			return killTracked(tracker)
		case <-t.C:
		}
	}
}

// killTracked kills what the tracker follows until nothing is left.
func killTracked(tracker *Tracker) error {
	deadline := time.Now().Add(reapTimeout)
	for {
		snap, err := snapshot()
		if err != nil {
			return err
		}
		members := tracker.Update(snap)
		if len(members) == 0 {
			return nil
		}
		kerr := killAll(members)
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("processes survive SIGKILL after %v: %v", reapTimeout, members), kerr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
