package launcherlinux

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// refuseUnsupported names the first field this backend has no mechanism for.
// Refusing is the only honest answer: running without it would be weaker than
// the policy asks.
func refuseUnsupported(p *sandboxdv1.Policy) error {
	const found = "this sandboxd version has no mechanism for it"
	if p.GetFilesystem().GetRead() == sandboxdv1.Filesystem_LISTED {
		return &launcher.Unenforceable{Field: "filesystem.read", Mechanism: "mount-ns root built from listed read roots", Found: found, Remedy: "use read ALL with deny paths for what must stay unreadable"}
	}
	return nil
}
