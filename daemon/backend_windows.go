package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"

	"github.com/sandboxd/sandboxd/internal/statedir"
	"github.com/sandboxd/sandboxd/launcher"
	launcherwindows "github.com/sandboxd/sandboxd/launcher_windows"
)

// backendLockName is the file in the state directory that one process at a
// time holds open while it has a backend there.
const backendLockName = "backend.lock"

// DefaultBackend is the sandbox backend for this OS: restricted tokens of
// dedicated sandbox users, NTFS ACLs, firewall filters and job objects on
// Windows. The sandbox users and filters are those `sandboxd install`
// provisioned under the same state directory.
func DefaultBackend(opts BackendOptions) (launcher.Backend, error) {
	// There is only one mechanism set, so the choice is checked here rather
	// than passed on: a forced set the backend does not have must be
	// refused, not ignored.
	if opts.MechanismSet != "" && opts.MechanismSet != launcherwindows.MechanismSet {
		return nil, fmt.Errorf("windows backend: no mechanism set %q, only %q", opts.MechanismSet, launcherwindows.MechanismSet)
	}
	dir := opts.StateDir
	if dir == "" {
		dir = statedir.Default()
	}
	if err := lockBackendState(dir); err != nil {
		return nil, err
	}
	return launcherwindows.New(launcherwindows.Config{StateDir: dir})
}

// lockBackendState keeps the backend's state directory to this process
// until it exits. The backend undoes, as it starts, whatever its journal
// there says sessions left on the host: a second daemon, or a self-test
// run beside the service, would otherwise undo the live sessions' ACL
// entries, deny paths among them. A directory that does not exist yet
// holds no journal to sweep and is left to the backend to report.
func lockBackendState(dir string) error {
	path := filepath.Join(dir, backendLockName)
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return fmt.Errorf("windows backend: %s: %w", path, err)
	}
	// No sharing: Windows refuses every other open until this handle is
	// closed, which only the process's exit does.
	_, err = windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil, windows.OPEN_ALWAYS, windows.FILE_ATTRIBUTE_NORMAL, 0)
	switch {
	case errors.Is(err, windows.ERROR_SHARING_VIOLATION):
		return fmt.Errorf("windows backend: state directory %s is in use by another sandboxd (the service?); stop it first", dir)
	case errors.Is(err, windows.ERROR_PATH_NOT_FOUND):
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("windows backend: lock %s: %w", path, err)
	case err != nil:
		return fmt.Errorf("windows backend: lock %s: %w", path, err)
	}
	return nil
}
