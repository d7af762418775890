package daemon

import (
	"fmt"

	"github.com/sandboxd/sandboxd/launcher"
	launcherdarwin "github.com/sandboxd/sandboxd/launcher_darwin"
)

// CheckMechanismSet rejects a forced mechanism set the backend does not
// have, before anything is probed.
func CheckMechanismSet(name string) error { return onlyMechanismSet(name, launcherdarwin.MechanismSet) }

// DefaultBackend is the sandbox backend for this OS: Seatbelt profiles
// applied through sandbox-exec on macOS. It probes the host before
// returning.
func DefaultBackend(opts BackendOptions) (launcher.Backend, error) {
	// There is only one mechanism set, so the choice is checked here
	// rather than passed on: a forced set the backend does not have must be
	// refused, not ignored.
	if err := CheckMechanismSet(opts.MechanismSet); err != nil {
		return nil, fmt.Errorf("darwin backend: %w", err)
	}
	if opts.InitPath != "" {
		return nil, fmt.Errorf("darwin backend: a sandbox init (--init) is Linux's; this backend has none")
	}
	return launcherdarwin.New(launcherdarwin.Config{
		SandboxUID: opts.SandboxUID,
		SandboxGID: opts.SandboxGID,
	})
}
