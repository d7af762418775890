//go:build unix

package auditlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// noFollow keeps an open from following a symlink at the last component.
const noFollow = unix.O_NOFOLLOW

// lockDir takes an exclusive flock on Dir/audit.lock. flock (not fcntl)
// because its lock belongs to the open file description: a second Open in
// the same process is refused too, and closing some other descriptor of the
// file does not drop it. The kernel releases it when the daemon dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	var lockErr error
	if err := rc.Control(func(fd uintptr) {
		lockErr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
	}); err != nil {
		lockErr = err
	}
	if lockErr != nil {
		f.Close()
		if errors.Is(lockErr, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("audit log %s is %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("audit log: flock %s: %w", path, lockErr)
	}
	return f, nil
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	syncErr := d.Sync()
	return errors.Join(syncErr, d.Close())
}
