package signum

import (
	"runtime"
	"syscall"
	"testing"
)

// The table must be Linux's numbering: checked against the kernel's own
// numbers where the test runs on Linux.
func TestLinuxTableIsLinuxNumbering(t *testing.T) {
	want := map[string]int32{"SIGHUP": 1, "SIGINT": 2, "SIGKILL": 9, "SIGUSR1": 10, "SIGUSR2": 12, "SIGTERM": 15, "SIGCHLD": 17, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20, "SIGWINCH": 28, "SIGSYS": 31}
	for name, n := range want {
		if got := linuxNumber(name); got != n {
			t.Errorf("linuxNumber(%s) = %d, want %d", name, got, n)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for n := int32(1); n <= MaxWire; n++ {
		sig, ok := ToHost(n)
		if !ok {
			if runtime.GOOS == "linux" {
				t.Errorf("ToHost(%d) has no host signal on Linux", n)
			}
			continue
		}
		if back := ToWire(sig); back != n {
			t.Errorf("ToWire(ToHost(%d) = %v) = %d", n, sig, back)
		}
	}
	for _, n := range []int32{0, -1, MaxWire + 1} {
		if _, ok := ToHost(n); ok {
			t.Errorf("ToHost(%d) accepted a number outside the wire's range", n)
		}
	}
	if ToWire(0) != 0 {
		t.Errorf("ToWire(0) != 0")
	}
	// What the daemon and sandboxctl rely on by name.
	for n, sig := range map[int32]syscall.Signal{1: syscall.SIGHUP, 2: syscall.SIGINT, 9: syscall.SIGKILL, 15: syscall.SIGTERM} {
		if got, ok := ToHost(n); !ok || got != sig {
			t.Errorf("ToHost(%d) = %v, %v; want %v", n, got, ok, sig)
		}
	}
}
