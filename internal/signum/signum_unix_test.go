//go:build unix

package signum

import (
	"syscall"
	"testing"
)

// The signals whose numbers differ between Linux and the BSDs.
func TestHostNumbersByName(t *testing.T) {
	for n, sig := range map[int32]syscall.Signal{10: syscall.SIGUSR1, 12: syscall.SIGUSR2, 17: syscall.SIGCHLD, 18: syscall.SIGCONT, 19: syscall.SIGSTOP, 20: syscall.SIGTSTP, 28: syscall.SIGWINCH} {
		if got, ok := ToHost(n); !ok || got != sig {
			t.Errorf("ToHost(%d) = %v, %v; want %v (%d here)", n, got, ok, sig, int(sig))
		}
		if got := ToWire(sig); got != n {
			t.Errorf("ToWire(%v) = %d, want %d", sig, got, n)
		}
	}
}
