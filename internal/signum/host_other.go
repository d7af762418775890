//go:build !unix

package signum

import "syscall"

// Without POSIX signals only the few Go emulates exist, under Linux's
// numbers (syscall defines SIGINT as 2, SIGKILL as 9, SIGTERM as 15).
func toHost(n int32) (syscall.Signal, bool) {
	switch s := syscall.Signal(n); s {
	case syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL, syscall.SIGTERM:
		return s, true
	}
	return 0, false
}

func toWire(sig syscall.Signal) int32 {
	if _, ok := toHost(int32(sig)); ok {
		return int32(sig)
	}
	return 0
}
