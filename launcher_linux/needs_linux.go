package launcherlinux

import "github.com/sandboxd/sandboxd/launcher"

// Needs says the backend confines network ALLOWLIST to the daemon's
// proxy: the sandbox's network namespace reaches nothing else.
func (b *backend) Needs() launcher.Needs { return launcher.Needs{Proxy: true} }
