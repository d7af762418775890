//go:build unix && !linux

package signum

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Elsewhere the signals are matched by name.
func toHost(n int32) (syscall.Signal, bool) {
	if int(n) >= len(linuxNames) || linuxNames[n] == "" {
		return 0, false
	}
	sig := unix.SignalNum(linuxNames[n])
	return sig, sig != 0
}

func toWire(sig syscall.Signal) int32 {
	return linuxNumber(unix.SignalName(sig))
}
