//go:build unix

package main

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func errnoName(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	if name := unix.ErrnoName(errno); name != "" {
		return name
	}
	return "errno " + strconv.Itoa(int(errno))
}

func startDetached(path string, args ...string) (int, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	p, err := os.StartProcess(path, append([]string{path}, args...), &os.ProcAttr{
		Files: []*os.File{null, null, null},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	return pid, p.Release()
}

// kill sends a signal to a pid given from outside: the suite passes a host
// process's pid, which a sandbox must not be able to reach.
func kill(args []string) Result {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	sig, err := strconv.Atoi(args[1])
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(unix.Kill(pid, syscall.Signal(sig)), nil)
}

// uid reports the identity inside the sandbox and, where the OS has them,
// the user namespace maps that say which host identity it stands for.
func uid([]string) Result {
	d := map[string]any{
		"uid":  os.Getuid(),
		"euid": os.Geteuid(),
		"gid":  os.Getgid(),
	}
	for _, m := range []string{"uid_map", "gid_map"} {
		if b, err := os.ReadFile("/proc/self/" + m); err == nil {
			d[m] = string(b)
		}
	}
	return outcome(nil, d)
}
