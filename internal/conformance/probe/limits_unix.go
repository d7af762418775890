//go:build unix

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// unixOps are the operations every Unix probe has, beside its OS's own.
func unixOps() map[string]op {
	m := map[string]op{
		"fork-bomb":     {1, forkBomb},
		"cpu-burn":      {1, cpuBurn},
		"detach-writer": {2, detachWriter},
		// The two halves of detach-writer's double fork; not for the
		// suite to call.
		"detach-writer-mid":   {2, detachWriterMid},
		"detach-writer-child": {2, detachWriterChild},
	}
	for name, o := range metaOps() {
		m[name] = o
	}
	for name, o := range socketOps() {
		m[name] = o
	}
	return m
}

// forkSeconds parses fork-bomb's duration in seconds (decimals allowed).
func forkSeconds(arg string) (time.Duration, error) {
	s, err := strconv.ParseFloat(arg, 64)
	if err != nil || s < 0 || s > 60 {
		return 0, fmt.Errorf("seconds %q: want a number from 0 to 60", arg)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// forkReport is fork-bomb's Result: ok when no fork failed. Detail says
// how many children it held at most, how many forks it tried and how many
// failed, and the errno of the first failure, which is also Errno.
func forkReport(held, forks, failures int, first error, capped bool) Result {
	detail := map[string]any{"held": held, "forks": forks, "failures": failures, "cap": forkCap, "capped": capped}
	if first == nil {
		return Result{OK: true, Detail: detail}
	}
	detail["first_failure"] = first.Error()
	return Result{Errno: errnoOf(first), Detail: detail}
}

// cpuTime is the CPU time the probe has used, all its threads, user and
// system.
func cpuTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// cpuBurn spins on one thread for DURATION (a Go duration) of wall-clock
// time. It is always ok; Detail is the CPU seconds it got (getrusage
// RUSAGE_SELF) and the wall seconds it spun, for the suite to judge: an
// unthrottled spin gets about one CPU second per wall second.
func cpuBurn(args []string) Result {
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	before, err := cpuTime()
	if err != nil {
		return outcome(err, nil)
	}
	start, spins := time.Now(), 0
	for time.Since(start) < d {
		spins++
	}
	wall := time.Since(start)
	after, err := cpuTime()
	if err != nil {
		return outcome(err, nil)
	}
	return Result{OK: true, Detail: map[string]any{
		"cpu_seconds":  (after - before).Seconds(),
		"wall_seconds": wall.Seconds(),
		"spins":        spins,
	}}
}

// detachWriter leaves behind a process that escapes its parent (a double
// fork: a middle process in a new session starts it and exits at once, so
// it is reparented) and, DELAY (a Go duration) later, writes PATH. It
// returns as soon as the middle process is gone; Detail is the pid of the
// escaped process. That process's command line holds PATH, so the suite can
// find it on the host by it.
func detachWriter(args []string) Result {
	if _, err := time.ParseDuration(args[1]); err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	self, err := os.Executable()
	if err != nil {
		return outcome(err, nil)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return outcome(err, nil)
	}
	defer r.Close()
	mid, err := startDetachedTo(w, self, "detach-writer-mid", args[0], args[1])
	w.Close()
	if err != nil {
		return outcome(err, nil)
	}
	line, rerr := bufio.NewReader(r).ReadString('\n')
	if _, err := mid.Wait(); err != nil {
		return outcome(err, nil)
	}
	if rerr != nil {
		return outcome(rerr, "the middle process reported no pid")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return outcome(err, fmt.Sprintf("the middle process reported %q", line))
	}
	return outcome(nil, pid)
}

// detachWriterMid is the middle of detach-writer's double fork: in a
// session of its own, it starts the writer, prints its pid and exits.
func detachWriterMid(args []string) Result {
	self, err := os.Executable()
	if err != nil {
		os.Exit(1)
	}
	pid, err := startDetached(self, "detach-writer-child", args[0], args[1])
	if err != nil {
		os.Exit(1)
	}
	fmt.Println(pid)
	os.Exit(0)
	return Result{}
}

// detachWriterChild is the escaped process: it sleeps DELAY, writes PATH
// and exits, printing nothing (its stdio is /dev/null).
func detachWriterChild(args []string) Result {
	d, _ := time.ParseDuration(args[1])
	time.Sleep(d)
	if err := writeFile(args[0]); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
	return Result{}
}

// startDetachedTo starts path in a new session with stdin and stderr on
// /dev/null and stdout on out.
func startDetachedTo(out *os.File, path string, args ...string) (*os.Process, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	return os.StartProcess(path, append([]string{path}, args...), &os.ProcAttr{
		Files: []*os.File{null, out, null},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
}
