package launcherwindows

import (
	"fmt"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// mechanismACL is what every filesystem field rests on.
const mechanismACL = "NTFS ACL"

// refuseUnsupported names the first field this backend has no mechanism
// for. Refusing is the only honest answer: running without it would be
// weaker than the policy asks.
func refuseUnsupported(p *sandboxdv1.Policy) error {
	const found = "this sandboxd version has no mechanism for it"
	if p.GetFilesystem().GetRead() == sandboxdv1.Filesystem_LISTED {
		return &launcher.Unenforceable{
			Field:     "filesystem.read",
			Mechanism: "a token that may read only the listed roots",
			Found:     "a write-restricted token narrows writes only, and denying every other path of the host by ACL is not feasible",
			Remedy:    "use read ALL with deny paths for what must stay unreadable",
		}
	}
	if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
		return &launcher.Unenforceable{Field: "network.allow", Mechanism: "daemon-run allowlist proxy", Found: found, Remedy: "use network NONE or HOST"}
	}
	return nil
}

// refusePath refuses the policy path p of field, or returns nil when an
// ACL can be stamped on it as spelled.
func refusePath(field, p string) error {
	if why := checkPath(p); why != "" {
		return &launcher.Unenforceable{
			Field:     field,
			Mechanism: mechanismACL + " on the path as spelled",
			Found:     why,
			Remedy:    `spell it as an absolute drive (C:\dir) or UNC (\\server\share\dir) path of plain names`,
		}
	}
	if isVolumeRoot(cleanPath(p)) {
		return &launcher.Unenforceable{
			Field:     field,
			Mechanism: mechanismACL + " below a directory",
			Found:     "the root of volume " + cleanPath(p) + ": an inheritable entry there is stamped on every file of the volume, and a write grant would stay on all of them",
			Remedy:    "name the directories the sandbox needs rather than the whole volume",
		}
	}
	return nil
}

// refuseUser refuses a session whose sandbox user is not provisioned.
func refuseUser(field, user string) error {
	return &launcher.Unenforceable{
		Field:     field,
		Mechanism: "the local user " + user,
		Found:     "no SID for it: the user is not provisioned",
		Remedy:    "run `sandboxd install` as an administrator",
	}
}

// refuseMissingRoot refuses the write root w, one of raw as the policy
// spells them, that does not exist: an ACE needs an object, and one the
// backend made would be a directory nobody asked for.
func refuseMissingRoot(raw []string, w string) error {
	field := "filesystem.write"
	for i, r := range raw {
		if samePath(cleanPath(r), w) {
			field = fmt.Sprintf("%s[%d]", field, i)
			break
		}
	}
	return &launcher.Unenforceable{
		Field:     field,
		Mechanism: mechanismACL + " on the write root",
		Found:     "no directory " + w,
		Remedy:    "create it before starting the session, or drop it from the policy",
	}
}
