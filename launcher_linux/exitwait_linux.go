package launcherlinux

import (
	"github.com/sandboxd/sandboxd/internal/fdwait"
)

// NotifyExit starts f once the init has written the command's end to its
// report pipe, or closed it by dying, with the pipe waiting in the shared
// waiter meanwhile rather than a goroutine in Wait (launcher.ExitNotifier).
func (p *process) NotifyExit(f func()) error {
	if p.report != nil {
		// Read along with the init's "started": the command ended at once.
		go f()
		return nil
	}
	_, err := fdwait.AddOnce(p.reportFile, f)
	return err
}
