package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// lockName is the file in the state directory that one process at a
// time holds open while it has a backend there.
const lockName = "backend.lock"

// Lock keeps the state directory dir to this process until it exits, for
// the Windows backend it serves. The backend undoes, as it starts, whatever its journal
// there says sessions left on the host: a second daemon, or a self-test
// run beside the service, would otherwise undo the live sessions' ACL
// entries, deny paths among them. A directory that does not exist yet
// holds no journal to sweep and is left to the backend to report.
func Lock(dir string) error {
	path := filepath.Join(dir, lockName)
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
