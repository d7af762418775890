package main

import (
	"errors"
	"os"
	"strconv"
	"syscall"

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
		"kill":     {2, kill},
		"open-rw":  {1, openRW},
		"identity": {0, identity},
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
