package daemon

import (
	"github.com/sandboxd/sandboxd/launcher"
	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
)

// DefaultBackend is the sandbox backend for this OS: namespaces, Landlock
// and seccomp on Linux.
func DefaultBackend() (launcher.Backend, error) {
	return launcherlinux.New(launcherlinux.Config{})
}
