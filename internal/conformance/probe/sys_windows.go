package main

import (
	"errors"
	"os"
	"strconv"
	"syscall"
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
	return map[string]op{}
}
