// Package signum translates signal numbers between the wire, which carries
// Linux's numbering whatever the OS (15 is SIGTERM, 10 SIGUSR1), and the
// host's: on macOS 10 is SIGBUS, and passing wire numbers through would
// deliver the wrong signal.
package signum

import "syscall"

// linuxNames are the classic Linux signals by number; 32 to 64 are the
// real-time signals, which have no names.
var linuxNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
	13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD",
	18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG",
	24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH",
	29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// MaxWire is the highest signal number the wire carries (Linux's SIGRTMAX).
const MaxWire = 64

// ToHost returns the host's signal for wire number n, false when the host
// has no such signal (SIGPWR and the real-time signals on macOS).
func ToHost(n int32) (syscall.Signal, bool) {
	if n <= 0 || n > MaxWire {
		return 0, false
	}
	return toHost(n)
}

// ToWire returns the wire number of the host's signal sig, 0 for 0 and for
// a signal Linux does not have (SIGEMT, SIGINFO on macOS).
func ToWire(sig syscall.Signal) int32 {
	if sig == 0 {
		return 0
	}
	return toWire(sig)
}

func linuxNumber(name string) int32 {
	for n, s := range linuxNames {
		if s == name && s != "" {
			return int32(n)
		}
	}
	return 0
}
