package signum

import "syscall"

// On Linux the wire's numbers are the host's.
func toHost(n int32) (syscall.Signal, bool) { return syscall.Signal(n), true }

func toWire(sig syscall.Signal) int32 {
	if sig < 0 || sig > MaxWire {
		return 0
	}
	return int32(sig)
}
