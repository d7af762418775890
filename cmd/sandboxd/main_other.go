//go:build !linux && !darwin && !windows

package main

import (
	"fmt"
	"runtime"
)

// runInitIfRequested has nothing to do: only the Linux backend re-executes
// the daemon as a sandbox's init.
func runInitIfRequested() {}

// checkMechanism accepts only the automatic choice: there is no backend
// with mechanism sets to choose from on this OS yet.
func checkMechanism(name string) error {
	if name != "" {
		return fmt.Errorf("no mechanism set %q on %s", name, runtime.GOOS)
	}
	return nil
}
