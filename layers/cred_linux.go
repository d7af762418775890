//go:build linux

package layers

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// as runs f with o's filesystem credentials: fsuid, fsgid and
// supplementary groups, set on f's OS thread alone (setfsuid, setfsgid
// and setgroups as raw system calls are per thread) and set back after.
// A fsuid that is not 0 drops root's CAP_DAC_OVERRIDE, CAP_FOWNER and
// the like, so the kernel judges every path f writes as it would the
// owner's. A thread whose credentials cannot be set back is not
// unlocked: the Go runtime ends it with the goroutine, so no other
// goroutine runs with the owner's ids.
func (o Owner) as(f func() error) error {
	if o.UID == 0 {
		return f()
	}
	runtime.LockOSThread()
	saved, err := unix.Getgroups()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("getgroups: %w", err)
	}
	groups := make([]int, len(o.Groups))
	for i, g := range o.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setgroups to the path owner's: %w", err)
	}
	unix.Setfsgid(int(o.GID))
	unix.Setfsuid(int(o.UID))
	ferr := errNotOwnCreds
	// setfsuid and setfsgid tell of no failure but by the ids they
	// return: read back (-1 changes nothing) before f runs.
	if uid, _ := unix.SetfsuidRetUid(-1); uid == int(o.UID) {
		if gid, _ := unix.SetfsgidRetGid(-1); gid == int(o.GID) {
			ferr = f()
		}
	}
	unix.Setfsuid(0)
	unix.Setfsgid(0)
	rerr := unix.Setgroups(saved)
	uid, _ := unix.SetfsuidRetUid(-1)
	gid, _ := unix.SetfsgidRetGid(-1)
	if rerr != nil || uid != 0 || gid != 0 {
		return fmt.Errorf("setting back the daemon's credentials after writing as uid %d: %v", o.UID, rerr)
	}
	runtime.UnlockOSThread()
	if errors.Is(ferr, unix.EACCES) || errors.Is(ferr, unix.EPERM) {
		return fmt.Errorf("%w (uid %d): %w", ErrOwnerMayNot, o.UID, ferr)
	}
	return ferr
}

var errNotOwnCreds = fmt.Errorf("the path owner's filesystem credentials could not be taken")
