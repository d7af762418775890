package main

import (
	"errors"
	"syscall"
	"testing"
)

// TestForkBombReapsEveryChild runs the fork bomb under a small cap of its
// own: it must hold exactly that many children, report no failure, and
// leave none behind.
func TestForkBombReapsEveryChild(t *testing.T) {
	defer func(old int) { forkCap = old }(forkCap)
	forkCap = 8
	r := forkBomb([]string{"0.5"})
	d := r.Detail.(map[string]any)
	if !r.OK || d["held"] != 8 || d["capped"] != true || d["failures"] != 0 {
		t.Errorf("fork-bomb under a cap of 8: %+v", r)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); !errors.Is(err, syscall.ECHILD) {
		t.Errorf("children left after fork-bomb: wait4 says %v", err)
	}
}

func TestForkBombRejectsBadSeconds(t *testing.T) {
	for _, arg := range []string{"x", "-1", "61"} {
		if r := forkBomb([]string{arg}); r.OK || r.Errno != "EINVAL" {
			t.Errorf("fork-bomb %s: %+v", arg, r)
		}
	}
}
