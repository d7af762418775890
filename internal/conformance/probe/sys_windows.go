package main

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

func errnoName(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	return "errno " + strconv.Itoa(int(errno))
}

func startDetached(path string, args ...string) (int, error) {
	p, err := os.StartProcess(path, append([]string{path}, args...), &os.ProcAttr{})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	return pid, p.Release()
}

func platformOps() map[string]op {
	return map[string]op{
		"kill":      {2, kill},
		"open-rw":   {1, openRW},
		"identity":  {0, identity},
		"commit":    {1, commit},
		"cpu-ratio": {0, cpuRatio},
	}
}

// kill terminates a pid given from outside; Windows has no signals, so the
// second argument (the signal the other hosts send) is ignored.
func kill(args []string) Result {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return outcome(err, nil)
	}
	defer windows.CloseHandle(h)
	return outcome(windows.TerminateProcess(h, 1), nil)
}

// openRW opens an existing file or named pipe for reading and writing, which
// is what connecting to the daemon's pipe takes.
func openRW(args []string) Result {
	f, err := os.OpenFile(args[0], os.O_RDWR, 0)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(f.Close(), nil)
}

// identity reports who the sandbox runs as: user, whether the token is
// elevated or restricted, and whether Administrators is enabled in it.
func identity([]string) Result {
	tok := windows.GetCurrentProcessToken()
	u, err := tok.GetTokenUser()
	if err != nil {
		return outcome(err, nil)
	}
	admins, err := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err != nil {
		return outcome(err, nil)
	}
	// A zero token checks the thread's impersonation token or, without
	// one, the primary token, which works for restricted tokens too.
	isAdmin, err := windows.Token(0).IsMember(admins)
	if err != nil {
		return outcome(err, nil)
	}
	restricted, err := tok.IsRestricted()
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, map[string]any{
		"user":       u.User.Sid.String(),
		"elevated":   tok.IsElevated(),
		"restricted": restricted,
		"admin":      isAdmin,
	})
}

// commit commits MiB of memory, which a job's memory limit refuses once the
// job would exceed it, and releases it again.
func commit(args []string) Result {
	mib, err := strconv.Atoi(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	addr, err := windows.VirtualAlloc(0, uintptr(mib)<<20, windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(windows.VirtualFree(addr, 0, windows.MEM_RELEASE), mib)
}

// cpuRatio spins for two seconds of wall-clock time and reports the CPU
// time the probe got in them, as a fraction of one processor: a job's CPU
// rate cap keeps it well below 1.
func cpuRatio([]string) Result {
	cpu := func() (time.Duration, error) {
		var c, e, k, u windows.Filetime
		if err := windows.GetProcessTimes(windows.CurrentProcess(), &c, &e, &k, &u); err != nil {
			return 0, err
		}
		return time.Duration(k.Nanoseconds() + u.Nanoseconds()), nil
	}
	before, err := cpu()
	if err != nil {
		return outcome(err, nil)
	}
	start, spins := time.Now(), 0
	for time.Since(start) < 2*time.Second {
		spins++
	}
	after, err := cpu()
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, map[string]any{"ratio": float64(after-before) / float64(time.Since(start)), "spins": spins})
}
