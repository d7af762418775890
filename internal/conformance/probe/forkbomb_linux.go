package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"
	"unsafe"
)

// forkCap is the most children fork-bomb holds at once: where no limit
// stops it, it stops there, so that a sandbox without limits.pids cannot
// take the host down.
var forkCap = 2000

// blockAll is the signal mask fork-bomb's children block: every signal,
// so none can run the Go handlers they inherited. SIGKILL still ends them.
var blockAll = ^uint64(0)

// forkBomb forks as fast as it can for SECONDS, holding every child it
// makes: each is a bare fork (clone without exec) that blocks all signals
// and waits, one task, so the count is the tasks a pids limit allows. A
// Go child made by re-exec would hold a handful of threads, and a Go
// parent that cannot start a thread dies, so the parent touches neither
// the scheduler nor the heap until its children are gone: raw system
// calls only, no garbage collection. After a failed fork it waits 1 ms
// and tries again. Then it kills and reaps every child and reports.
func forkBomb(args []string) Result {
	d, err := forkSeconds(args[0])
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// One P: when the scheduler preempts this goroutine there is no idle
	// P for it to start a thread for, which it could not while the
	// children hold every task the limit allows.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	parent := uintptr(os.Getpid())
	pids := make([]uintptr, 0, forkCap)
	var first error
	forks, failures, capped := 0, 0, false
	backoff := syscall.Timespec{Nsec: int64(time.Millisecond)}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if len(pids) >= forkCap {
			capped = true
			break
		}
		forks++
		pid, errno := rawFork(parent)
		if errno != 0 {
			failures++
			if first == nil {
				first = errno
			}
			syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&backoff)), 0, 0)
			continue
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		syscall.RawSyscall(syscall.SYS_KILL, pid, uintptr(syscall.SIGKILL), 0)
	}
	for _, pid := range pids {
		for {
			_, _, errno := syscall.RawSyscall6(syscall.SYS_WAIT4, pid, 0, 0, 0, 0, 0)
			if errno != syscall.EINTR {
				break
			}
		}
	}
	return forkReport(len(pids), forks, failures, first, capped)
}

// rawFork makes one child that runs forkChild and returns its pid.
func rawFork(parent uintptr) (uintptr, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	if pid == 0 {
		forkChild(parent)
	}
	return pid, 0
}

// forkChild is all a fork-bomb child runs: a copy of a multi-threaded Go
// process with one thread, it may make raw system calls and nothing else.
// It blocks every signal, dies with the thread that forked it, and waits
// for SIGKILL.
//
//go:nosplit
//go:norace
func forkChild(parent uintptr) {
	const sigSetmask, prSetPdeathsig = 2, 1
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigSetmask, uintptr(unsafe.Pointer(&blockAll)), 0, 8, 0, 0)
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0)
	if ppid, _, _ := syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0); ppid != parent {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	for {
		syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
	}
}
