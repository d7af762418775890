package daemon

import (
	"fmt"

	"github.com/sandboxd/sandboxd/launcher"
	launcherdarwin "github.com/sandboxd/sandboxd/launcher_darwin"
)

// DefaultBackend is the sandbox backend for this OS: Seatbelt profiles
// applied through sandbox-exec on macOS. It probes the host before
// returning.
func DefaultBackend(opts BackendOptions) (launcher.Backend, error) {
	// Seatbelt is the only mechanism set, so the choice is checked here
	// rather than passed on: a forced set the backend does not have must be
	// refused, not ignored.
	if opts.MechanismSet != "" && opts.MechanismSet != launcherdarwin.MechanismSet {
		return nil, fmt.Errorf("darwin backend: no mechanism set %q, only %q", opts.MechanismSet, launcherdarwin.MechanismSet)
	}
	return launcherdarwin.New(launcherdarwin.Config{
		SandboxUID: opts.SandboxUID,
		SandboxGID: opts.SandboxGID,
	})
}
