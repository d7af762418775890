package daemon

import (
	"fmt"

	"github.com/sandboxd/sandboxd/internal/statedir"
	"github.com/sandboxd/sandboxd/launcher"
	launcherwindows "github.com/sandboxd/sandboxd/launcher_windows"
)

// CheckMechanismSet rejects a forced mechanism set the backend does not
// have, before anything is probed.
func CheckMechanismSet(name string) error {
	return onlyMechanismSet(name, launcherwindows.MechanismSet)
}

// DefaultBackend is the sandbox backend for this OS: restricted tokens of
// dedicated sandbox users, NTFS ACLs, firewall filters and job objects on
// Windows. The sandbox users and filters are those `sandboxd install`
// provisioned under the same state directory.
func DefaultBackend(opts BackendOptions) (launcher.Backend, error) {
	// There is only one mechanism set, so the choice is checked here
	// rather than passed on: a forced set the backend does not have must be
	// refused, not ignored.
	if err := CheckMechanismSet(opts.MechanismSet); err != nil {
		return nil, fmt.Errorf("windows backend: %w", err)
	}
	if opts.InitPath != "" {
		return nil, fmt.Errorf("windows backend: a sandbox init (--init) is Linux's; this backend has none")
	}
	dir := opts.StateDir
	if dir == "" {
		dir = statedir.Default()
	}
	if err := statedir.Lock(dir); err != nil {
		return nil, err
	}
	return launcherwindows.New(launcherwindows.Config{StateDir: dir})
}
