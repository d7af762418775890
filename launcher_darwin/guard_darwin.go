//go:build darwin

package launcherdarwin

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// guardEnv makes the daemon's binary the sessions' guard (RunGuardIfRequested).
const guardEnv = "SANDBOXD_DARWIN_GUARD"

// The guard is the daemon's binary again, outside every sandbox and in a
// session of its own, holding the read end of a pipe whose write end only
// the daemon has. macOS has no parent-death signal and no pid namespace
// whose end takes every process with it: when the daemon dies, however it
// dies, the pipe reads end-of-file and the guard kills every process of
// every session, which it follows as the daemon does. One guard serves all
// of a daemon's sessions; the daemon tells it on the pipe which sessions
// start and which it has reaped (guardSet).
type guard struct {
	path string

	mu       sync.Mutex
	lifeline *os.File
	// sessions are the announced leaders and their start times, told
	// again to a guard started after the last one died.
	sessions map[int]int64
}

func newGuard(path string) *guard {
	return &guard{path: path, sessions: map[int]int64{}}
}

// add announces the session whose leader is pid, starting the guard if
// none runs.
func (g *guard) add(pid int, start int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sessions[pid] = start
	line := "+" + strconv.Itoa(pid) + " " + strconv.FormatInt(start, 10) + "\n"
	if g.lifeline != nil {
		if _, err := g.lifeline.WriteString(line); err == nil {
			return nil
		}
		// The guard died: the pipe has no reader.
		g.lifeline.Close()
		g.lifeline = nil
	}
	if err := g.startLocked(); err != nil {
		delete(g.sessions, pid)
		return err
	}
	return nil
}

// remove tells the guard the daemon has reaped the session of pid.
func (g *guard) remove(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sessions, pid)
	if g.lifeline != nil {
		// A guard that died is started again, with what is left, by the
		// next add.
		_, _ = g.lifeline.WriteString("-" + strconv.Itoa(pid) + "\n")
	}
}

// startLocked starts a guard and tells it every session.
func (g *guard) startLocked() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("session guard: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(g.path)
	cmd.Env = []string{guardEnv + "=1"}
	// fd 3; the guard's stdio is /dev/null but for its complaints.
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr
	// Its own session: a signal to the daemon's process group (launchd
	// stopping the job) must leave the guard to do its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("session guard %s: %w", g.path, err)
	}
	go func() { _ = cmd.Wait() }()
	for pid, start := range g.sessions {
		if _, err := w.WriteString("+" + strconv.Itoa(pid) + " " + strconv.FormatInt(start, 10) + "\n"); err != nil {
			w.Close()
			return fmt.Errorf("session guard: %w", err)
		}
	}
	g.lifeline = w
	return nil
}

// RunGuardIfRequested runs the sessions' guard and exits when the process
// was started as one; it returns at once otherwise. The daemon's main
// calls it first thing.
func RunGuardIfRequested() {
	if _, ok := os.LookupEnv(guardEnv); !ok {
		return
	}
	if err := runGuard(os.NewFile(3, "lifeline")); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd session guard: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runGuard(lifeline *os.File) error {
	// Only the lifeline ends the guard: not the terminal hanging up, not
	// a signal meant for the daemon.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(lifeline)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	set := newGuardSet()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return killTracked(set)
			}
			if err := set.apply(line); err != nil {
				fmt.Fprintf(os.Stderr, "sandboxd session guard: %v\n", err)
			}
		case <-t.C:
			if snap, err := snapshot(); err == nil {
				set.update(snap)
			}
		}
	}
}

// killTracked kills what the guard follows until nothing is left.
func killTracked(set *guardSet) error {
	deadline := time.Now().Add(reapTimeout)
	for {
		snap, err := snapshot()
		if err != nil {
			return err
		}
		members := set.update(snap)
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
