package launcherlinux

import (
	"fmt"
	"slices"

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

// refuseWithinDaemonState refuses a write root or layer at or beneath the
// daemon's state directory or a directory of its sockets: the daemon
// masks those in every sandbox, so the grant could never be what the
// policy says, and writing there would be acting on the daemon's own
// records.
func refuseWithinDaemonState(fs *sandboxdv1.Filesystem, in launcher.PlanRequest) error {
	for _, field := range []string{"filesystem.write", "filesystem.layer"} {
		roots := fs.GetWrite()
		if field == "filesystem.layer" {
			roots = fs.GetLayer()
		}
		for _, w := range roots {
			for _, d := range slices.Concat(in.Protect, in.HideSockets) {
				if within(w, d) {
					return &launcher.Unenforceable{
						Field: field, Mechanism: "no write root inside the daemon's own state",
						Found:  fmt.Sprintf("%s is at or beneath %s, which the daemon keeps from every sandbox (its state directory or sockets)", w, d),
						Remedy: "grant a path outside the daemon's --state-dir and socket directories, or run the daemon with those elsewhere",
					}
				}
			}
		}
	}
	return nil
}
