//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process the parent of any orphan in its tree.
// bwrap's --die-with-parent does not cover a sandbox whose bwrap is killed
// while the sandbox is still being set up (an interrupt during a ramp of
// hundreds): its pid 1 is orphaned and would live on under the host's init.
// As subreaper, this process adopts it and reapAdopted can end it.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}

// reapAdopted kills and reaps children of this process that no exec.Cmd
// waits for: orphans adopted as subreaper, recognized by marker in their
// command line (the workspace path, which every bwrap of this run is
// given), and zombies (a sandbox's pid 1 that did die with its bwrap still
// comes here to be reaped). It returns how many were still running. Call it
// only when no exec.Cmd of this process is outstanding, as it would
// otherwise reap one under its owner.
func reapAdopted(marker string) (killed int) {
	// --die-with-parent's SIGKILL is on its way to most of them.
	time.Sleep(200 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var found []int
		for _, pid := range children(os.Getpid()) {
			if zombie(pid) {
				found = append(found, pid)
				continue
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err == nil && bytes.Contains(cmdline, []byte(marker)) {
				found = append(found, pid)
				killed++
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return killed
		}
		for _, pid := range found {
			_ = unix.Kill(pid, unix.SIGKILL)
			_, _ = unix.Wait4(pid, nil, 0, nil)
		}
	}
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain spaces or parentheses.
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && strings.HasPrefix(string(data[i+1:]), " Z")
}
