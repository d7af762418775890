package main

import (
	"fmt"

	launcherdarwin "github.com/sandboxd/sandboxd/launcher_darwin"
)

// runInitIfRequested has nothing to do: sandbox-exec applies the profile
// and executes the command itself, so the daemon is never re-executed as a
// sandbox's init on macOS.
func runInitIfRequested() {}

// checkMechanism rejects a --mechanism the backend does not have before
// anything is probed, as a usage error.
func checkMechanism(name string) error {
	if name != "" && name != launcherdarwin.MechanismSet {
		return fmt.Errorf("no mechanism set %q on darwin, only %q", name, launcherdarwin.MechanismSet)
	}
	return nil
}
