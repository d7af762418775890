//go:build windows

package auditlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// lockDir opens Dir/audit.lock with no sharing allowed, which Windows
// enforces until the handle is closed or the process dies: a second daemon
// gets a sharing violation.
// noFollow is 0: Windows opens a symlink's target only for a caller with
// the privilege to make symlinks, which is the service's own.
const noFollow = 0

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %s: %w", path, err)
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil,
		windows.OPEN_ALWAYS, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if errors.Is(err, windows.ERROR_SHARING_VIOLATION) {
		return nil, fmt.Errorf("audit log %s is %w", dir, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("audit log: open %s: %w", path, err)
	}
	return os.NewFile(uintptr(h), path), nil
}

// syncDir does nothing: Windows cannot flush a directory handle, and NTFS
// journals the rename itself.
func syncDir(string) error { return nil }
