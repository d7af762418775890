package launcherwindows

import (
	"fmt"
	"slices"

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

// refuseNotInheriting refuses an existing carve-out or deny path inside a
// write root below which some object does not inherit the entries the
// plan stamps on it. The sandbox user may have made such an object in an
// earlier session (a DACL given at creation needs no WRITE_DAC), and
// below a carve-out or deny path it would keep whatever that session
// granted. notInheriting nil means that cannot be known.
func refuseNotInheriting(notInheriting func(string) (string, error), exists func(string) bool, write, readOnly, deny []string) error {
	for _, g := range []struct {
		field string
		paths []string
	}{{"filesystem.read_only", readOnly}, {"filesystem.deny", deny}} {
		for _, p := range g.paths {
			if outermost(p, write) == "" || !exists(p) {
				continue
			}
			u := &launcher.Unenforceable{
				Field:     g.field,
				Mechanism: mechanismACL + ": a deny entry inherited by every object below " + p,
				Remedy:    `let every object below it inherit (icacls "` + p + `" /reset /T), or drop it from the policy`,
			}
			if notInheriting == nil {
				u.Found = "whether every object below it inherits could not be checked"
				return u
			}
			obj, err := notInheriting(p)
			if err != nil {
				u.Found = "whether every object below it inherits could not be checked: " + err.Error()
				return u
			}
			if obj != "" {
				u.Found = obj + " has a DACL protected from inheritance: the entries stamped on " + p + " would not reach it"
				return u
			}
		}
	}
	return nil
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
