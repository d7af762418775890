package launcherwindows

import (
	"fmt"
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// mechanismACL is what every filesystem field rests on.
const mechanismACL = "NTFS ACL"

// needs is what the backend needs of the daemon: nothing, as no sandbox
// here can be confined to the allowlist proxy.
var needs = launcher.Needs{}

// refuseUnsupported names the first field this backend has no mechanism
// for. Refusing is the only honest answer: running without it would be
// weaker than the policy asks.
func refuseUnsupported(p *sandboxdv1.Policy) error {
	if p.GetFilesystem().GetRead() == sandboxdv1.Filesystem_LISTED {
		return &launcher.Unenforceable{
			Field:     "filesystem.read",
			Mechanism: "a token that may read only the listed roots",
			Found:     "a write-restricted token narrows writes only, and denying every other path of the host by ACL is not feasible",
			Remedy:    "use read ALL with deny paths for what must stay unreadable",
		}
	}
	if u := needs.Refusal(p); u != nil {
		return u
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

// policyField names the clean path p of field, one of raw as the policy
// spells them: "filesystem.write[1]".
func policyField(field string, raw []string, p string) string {
	for i, r := range raw {
		if samePath(cleanPath(r), p) {
			return fmt.Sprintf("%s[%d]", field, i)
		}
	}
	return field
}

// refuseMissingRoot refuses the write root w, one of raw as the policy
// spells them, that does not exist: an ACE needs an object, and one the
// backend made would be a directory nobody asked for.
func refuseMissingRoot(raw []string, w string) error {
	return &launcher.Unenforceable{
		Field:     policyField("filesystem.write", raw, w),
		Mechanism: mechanismACL + " on the write root",
		Found:     "no directory " + w,
		Remedy:    "create it before starting the session, or drop it from the policy",
	}
}

// refuseLinked refuses the existing path p of field, on whose DACL the
// plan stamps entries, unless it is a directory or a file of one name:
// the entries would hold for the file's every other name too, wherever
// it lies (directories have one). kind nil means that cannot be known.
func refuseLinked(kind func(string) (bool, uint32, error), field, p string) error {
	u := &launcher.Unenforceable{
		Field:     field,
		Mechanism: mechanismACL + " on the object the path names, which no other name shares",
		Remedy:    "name a directory or a file with one name (fsutil hardlink list shows a file's others), or drop it from the policy",
	}
	if kind == nil {
		u.Found = "whether " + p + " is a directory or a file of one name could not be checked"
		return u
	}
	dir, links, err := kind(p)
	switch {
	case err != nil:
		u.Found = "whether " + p + " is a directory or a file of one name could not be checked: " + err.Error()
	case dir || links == 1:
		return nil
	default:
		u.Found = fmt.Sprintf("%s is a file of %d names (hard links): the entries stamped on it would hold for every other, wherever it lies", p, links)
	}
	return u
}

// refuseSession refuses what this backend cannot yet do for the session
// as asked, however the policy reads.
func refuseSession(in planInput) error {
	if in.Terminal {
		return &launcher.Unenforceable{
			Field:     "process",
			Mechanism: "a pseudo console whose host process runs as the sandbox user inside the session's job",
			Found:     "CreatePseudoConsole starts conhost.exe as the daemon, LocalSystem, outside the job: the sandbox would talk to a process of the host's most privileged account that none of the session's limits reach",
			Remedy:    "run the command without a terminal (a pipe session)",
		}
	}
	if !in.Child {
		return nil
	}
	l := in.Policy.GetLimits()
	for _, c := range []struct {
		field string
		set   bool
	}{
		{"limits.memory_bytes", l.GetMemoryBytes() != 0},
		{"limits.pids", l.GetPids() != 0},
		{"limits.cpu_millis", l.GetCpuMillis() != 0},
	} {
		if c.set {
			// A child's policy is narrowed against its parent's, so a
			// parent with the limit gives its child the limit too.
			return &launcher.Unenforceable{
				Field:     c.field,
				Mechanism: "the child's job object nested in its parent's, so that the parent's limit counts both",
				Found:     "every session's job object is a top-level job here: a child's processes would not count against its parent's limit",
				Remedy:    "drop the limit from the parent session's policy, or start the worker as a session of its own",
			}
		}
	}
	return nil
}

// Rights whose grant below a carve-out or deny path undoes it, in the
// entries' generic form too (an inherit-only entry keeps GENERIC_*).
const (
	carveOutDenied = WriteAccess | GENERIC_WRITE | GENERIC_ALL
	denyPathDenied = FILE_ALL_ACCESS&^SYNCHRONIZE | GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL
)

// refuseUninherited refuses an existing carve-out or deny path (only
// those inside a write root are carve-outs) below which an object's own
// DACL would give the session what the entries pl stamps on the path deny
// it. Windows reads an object's explicit entries before those it
// inherits, and a protected DACL inherits nothing, so neither the
// inherited deny nor the write root's OWNER RIGHTS entry reaches such an
// object. Deny paths outside the write roots too: the sandbox may
// traverse to an object it may read (SeChangeNotifyPrivilege), and the
// host may have given one there a DACL of its own. uninherited nil means
// that cannot be known.
func refuseUninherited(pl *Plan, uninherited func(string) ([]Object, error), exists func(string) bool, readOnly, deny []string) error {
	for _, g := range []struct {
		field  string
		denied uint32
		paths  []string
	}{{"filesystem.read_only", carveOutDenied, readOnly}, {"filesystem.deny", denyPathDenied, deny}} {
		for _, p := range g.paths {
			if !exists(p) {
				continue
			}
			u := &launcher.Unenforceable{
				Field:     g.field,
				Mechanism: mechanismACL + ": a deny entry inherited by every object below " + p,
				Remedy:    `let every object below it inherit, with no entries of its own (icacls "` + p + `" /reset /T), or drop it from the policy`,
			}
			if uninherited == nil {
				u.Found = "whether every object below it inherits could not be checked"
				return u
			}
			objs, err := uninherited(p)
			if err != nil {
				u.Found = "whether every object below it inherits could not be checked: " + err.Error()
				return u
			}
			for _, o := range objs {
				if why := pl.overrides(o, samePath(o.Path, p), g.denied); why != "" {
					u.Found = o.Path + " " + why + ": the session could keep what the entries stamped on " + p + " deny it"
					return u
				}
			}
		}
	}
	return nil
}

// overrides says what of o's DACL gives the session some of the rights
// denied, "" for nothing. On the carve-out or deny path itself (top) the
// stamped entries are explicit and denies come first, so only its owner's
// implicit rights count.
func (pl *Plan) overrides(o Object, top bool, denied uint32) string {
	ownerRights := slices.ContainsFunc(o.Allows, func(g Grant) bool { return g.SID == SIDOwnerRights })
	if o.Protected && !ownerRights && denied&(READ_CONTROL|WRITE_DAC) != 0 && pl.mayHold(o.Owner) {
		return "has a DACL protected from inheritance and no OWNER RIGHTS entry, and its owner " + trusteeName(o.Owner) + " may rewrite it"
	}
	if top {
		return ""
	}
	for _, g := range o.Allows {
		held := pl.mayHold(g.Trustee)
		if g.SID == SIDOwnerRights {
			held = pl.mayHold(o.Owner)
		}
		if g.Mask&denied == 0 || !held {
			continue
		}
		if o.Protected {
			return fmt.Sprintf("has a DACL protected from inheritance that allows %s access 0x%X", trusteeName(g.Trustee), g.Mask)
		}
		return fmt.Sprintf("has an entry of its own allowing %s access 0x%X, which Windows reads before any inherited deny", trusteeName(g.Trustee), g.Mask)
	}
	return ""
}

// mayHold reports whether an entry for t may grant something to the
// session's token. It fails closed: a SID not known to be out of the
// token's reach may be a group an administrator put the sandbox user in.
func (pl *Plan) mayHold(t Trustee) bool {
	s := t.SID
	switch {
	case s == "":
		return true
	case t.User:
		return s == pl.UserSID
	case s == SIDLocalSystem, s == SIDLocalService, s == SIDNetworkService, slices.Contains(pl.Token.DenyOnly, s):
		return false
	case strings.HasPrefix(s, "S-1-5-5-"):
		// A logon SID: the session's own logon is not made yet.
		return false
	case strings.HasPrefix(s, "S-1-5-80-"), strings.HasPrefix(s, "S-1-15-2-"):
		// Service and app container SIDs, which a user's logon outside
		// an app container never holds.
		return false
	case strings.HasPrefix(s, "S-1-15-3-"):
		// Capability SIDs, sandboxd's own among them: only those the
		// token restricts with count, in its restricting pass.
		return slices.Contains(pl.Token.Restricting, s)
	}
	return true
}

func trusteeName(t Trustee) string {
	if t.SID == "" {
		return "an unread trustee"
	}
	return t.SID
}

// RefuseProgram refuses to start the program at the resolved path prog
// where another session of the sandbox user could change it:
// CreateProcessAsUser opens the program as LocalSystem after the daemon
// checked, as the sandbox, that it may run it, and between the two a
// program below a write root can be replaced (by a junction to something
// only LocalSystem may read, say).
func (p *Plan) RefuseProgram(prog string) error {
	prog = cleanPath(prog)
	if !slices.ContainsFunc(p.writable, func(w string) bool { return within(prog, w) }) {
		return nil
	}
	return &launcher.Unenforceable{
		Field:     "process",
		Mechanism: "starting the program as the sandbox sees it",
		Found:     prog + " lies in a directory the sandbox user may write, and CreateProcessAsUser opens it as LocalSystem after the daemon's check as the sandbox",
		Remedy:    `start it through a program outside the write roots, which then runs it as the sandbox (cmd /c "` + prog + `", powershell -File), or install it outside the write roots`,
	}
}

// PathCheck is a policy path whose owner the daemon compares with a
// caller that is not an administrator.
type PathCheck struct {
	// Field names the path in the policy, e.g. "filesystem.deny[1]".
	Field, Path string
	// MustExist: a write root must; a carve-out or deny path that does
	// not exist outside every write root is not stamped.
	MustExist bool
}

// OwnershipChecks are the paths of p on whose ACLs the service would
// stamp entries as LocalSystem outside what the caller's own write roots
// cover: the write roots themselves, and the carve-outs and deny paths
// outside them. A caller that owns a path may change its ACL itself, so
// for those the service does nothing the caller could not.
func OwnershipChecks(p *sandboxdv1.Policy) []PathCheck {
	fs := p.GetFilesystem()
	var write []string
	var out []PathCheck
	for i, w := range fs.GetWrite() {
		write = append(write, cleanPath(w))
		out = append(out, PathCheck{Field: fmt.Sprintf("filesystem.write[%d]", i), Path: w, MustExist: true})
	}
	for _, g := range []struct {
		field string
		paths []string
	}{{"filesystem.read_only", fs.GetReadOnly()}, {"filesystem.deny", fs.GetDeny()}} {
		for i, c := range g.paths {
			if outermost(cleanPath(c), write) == "" {
				out = append(out, PathCheck{Field: fmt.Sprintf("%s[%d]", g.field, i), Path: c})
			}
		}
	}
	return out
}
