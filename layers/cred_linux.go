//go:build linux

package layers

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// as runs f with o's filesystem credentials: fsuid, fsgid and
// supplementary groups, set on an OS thread of f's own alone (setfsuid,
// setfsgid and setgroups as raw system calls are per thread) and set
// back after. A fsuid that is not 0 drops root's CAP_DAC_OVERRIDE,
// CAP_FOWNER and the like, so the kernel judges every path f writes as
// it would the owner's. f runs on a goroutine of its own, locked to its
// thread, rather than the caller's (a gRPC stream worker that goes on
// serving other calls): a thread whose credentials cannot be set back is
// parked for good, neither handed back to the runtime with the owner's
// ids nor ended (which would kill the inits it forked, their parent
// death signal). f's result stands then, but the daemon writes nothing
// more as an owner (credsLost) until it is restarted.
func (o Owner) as(f func() error) error {
	if o.UID == 0 {
		return f()
	}
	if err := credsLost.Load(); err != nil {
		return *err
	}
	type result struct{ ferr, rerr error }
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ferr, rerr := o.span(f)
		done <- result{ferr, rerr}
		if rerr != nil {
			select {}
		}
		runtime.UnlockOSThread()
	}()
	r := <-done
	if r.rerr != nil {
		err := fmt.Errorf("setting back the daemon's credentials after writing as uid %d (that thread is parked; the daemon writes nothing more as a path's owner until it is restarted): %w", o.UID, r.rerr)
		credsLost.CompareAndSwap(nil, &err)
	}
	if errors.Is(r.ferr, unix.EACCES) || errors.Is(r.ferr, unix.EPERM) {
		return fmt.Errorf("%w (uid %d): %w", ErrOwnerMayNot, o.UID, r.ferr)
	}
	return r.ferr
}

// credsLost is why the daemon's credentials could not be set back on a
// thread once: nil but then.
var credsLost atomic.Pointer[error]

// testHookRestore, when set, runs in span to set the thread's credentials
// back with restore: a test fails that.
var testHookRestore func(restore func() error) error

// span runs f on the calling thread, locked to it, with o's filesystem
// credentials, and sets back the thread's own (as they were, read with
// the -1 that changes nothing), saying in rerr when it could not.
func (o Owner) span(f func() error) (ferr, rerr error) {
	saved, err := unix.Getgroups()
	if err != nil {
		return fmt.Errorf("getgroups: %w", err), nil
	}
	uid0, _ := unix.SetfsuidRetUid(-1)
	gid0, _ := unix.SetfsgidRetGid(-1)
	groups := make([]int, len(o.Groups))
	for i, g := range o.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups to the path owner's: %w", err), nil
	}
	unix.Setfsgid(int(o.GID))
	unix.Setfsuid(int(o.UID))
	ferr = errNotOwnCreds
	// setfsuid and setfsgid tell of no failure but by the ids they
	// return: read back before f runs.
	if uid, _ := unix.SetfsuidRetUid(-1); uid == int(o.UID) {
		if gid, _ := unix.SetfsgidRetGid(-1); gid == int(o.GID) {
			ferr = f()
		}
	}
	restore := func() error {
		unix.Setfsuid(uid0)
		unix.Setfsgid(gid0)
		return unix.Setgroups(saved)
	}
	if testHookRestore != nil {
		rerr = testHookRestore(restore)
	} else {
		rerr = restore()
	}
	uid, _ := unix.SetfsuidRetUid(-1)
	gid, _ := unix.SetfsgidRetGid(-1)
	if rerr == nil && (uid != uid0 || gid != gid0) {
		rerr = fmt.Errorf("fsuid %d and fsgid %d remain, not %d and %d", uid, gid, uid0, gid0)
	}
	return ferr, rerr
}

var errNotOwnCreds = fmt.Errorf("the path owner's filesystem credentials could not be taken")
