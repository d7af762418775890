package main

import (
	"fmt"

	launcherdarwin "github.com/sandboxd/sandboxd/launcher_darwin"
)

// runInitIfRequested runs the daemon's binary as a session's guard when
// the backend started it as one (sandbox-exec applies the profile and
// executes the command itself, so there is no init on macOS).
func runInitIfRequested() { launcherdarwin.RunGuardIfRequested() }

// checkMechanism rejects a --mechanism the backend does not have before
// anything is probed, as a usage error.
func checkMechanism(name string) error {
	if name != "" && name != launcherdarwin.MechanismSet {
		return fmt.Errorf("no mechanism set %q on darwin, only %q", name, launcherdarwin.MechanismSet)
	}
	return nil
}
