package launcherwindows

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// sessionIDPattern is what a session id may be: it names a pipe and is
// hashed into a SID, and nothing in it may need quoting in either.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// defaultDACL is the token's default DACL. OWNER RIGHTS limited to
// READ_CONTROL takes away the WRITE_DAC an owner otherwise has implicitly:
// every session runs as one of two shared users, and without it one
// session could rewrite the DACL of another's processes and open them.
const defaultDACL = "D:(A;;GA;;;" + LogonSID + ")(A;;GA;;;SY)(A;;RC;;;OW)"

// NewPlan plans the session req asks for on the host on describes. It returns
// *launcher.Unenforceable when a field cannot be enforced on Windows, and an
// error when the input itself is unusable (a session id, temporary
// directory or environment the daemon should not have passed).
func NewPlan(req launcher.PlanRequest, on PlanHost) (*Plan, error) {
	in := planInput{req, on}
	if err := refuseUnsupported(in.Policy); err != nil {
		return nil, err
	}
	if err := refuseSession(in); err != nil {
		return nil, err
	}
	if !sessionIDPattern.MatchString(in.SessionID) {
		return nil, fmt.Errorf("session id %q cannot name a pipe", in.SessionID)
	}
	fs := in.Policy.GetFilesystem()
	write, err := policyPaths("filesystem.write", fs.GetWrite())
	if err != nil {
		return nil, err
	}
	readOnly, err := policyPaths("filesystem.read_only", fs.GetReadOnly())
	if err != nil {
		return nil, err
	}
	deny, err := policyPaths("filesystem.deny", fs.GetDeny())
	if err != nil {
		return nil, err
	}
	// Package policy compares paths as the host's path/filepath does,
	// case-sensitively; NTFS does not, so what it normalized away is done
	// again here, regardless of case. A write root inside a carve-out or
	// a deny path could never be written, and one inside another write
	// root adds nothing but a second way to rename what lies below it.
	all := slices.Clone(write)
	write = slices.DeleteFunc(write, func(w string) bool {
		return outermost(w, readOnly) != "" || outermost(w, deny) != "" ||
			slices.ContainsFunc(all, func(o string) bool { return !samePath(o, w) && within(w, o) })
	})
	readOnly = slices.DeleteFunc(readOnly, func(c string) bool { return outermost(c, write) == "" })

	exists := in.Exists
	if exists == nil {
		exists = func(string) bool { return true }
	}
	for _, w := range write {
		if !exists(w) {
			return nil, refuseMissingRoot(fs.GetWrite(), w)
		}
		if err := refuseLinked(in.Kind, policyField("filesystem.write", fs.GetWrite(), w), w); err != nil {
			return nil, err
		}
	}
	for _, g := range []struct {
		field string
		raw   []string
		paths []string
	}{{"filesystem.read_only", fs.GetReadOnly(), readOnly}, {"filesystem.deny", fs.GetDeny(), deny}} {
		for _, p := range g.paths {
			if !exists(p) {
				continue
			}
			if err := refuseLinked(in.Kind, policyField(g.field, g.raw, p), p); err != nil {
				return nil, err
			}
		}
	}

	if why := checkPath(in.TempDir); why != "" {
		return nil, fmt.Errorf("session temporary directory: %s", why)
	}
	if isVolumeRoot(cleanPath(in.TempDir)) {
		return nil, fmt.Errorf("session temporary directory %q is the root of a volume", in.TempDir)
	}
	tempDir := cleanPath(in.TempDir)

	host := in.Policy.GetNetwork().GetMode() == sandboxdv1.Network_HOST
	pl := &Plan{User: OfflineUser, UserSID: in.OfflineSID, Desktop: DesktopName, sids: map[string]string{}}
	if host {
		pl.User, pl.UserSID = OnlineUser, in.OnlineSID
	}
	if pl.UserSID == "" {
		return nil, refuseUser("network.mode", pl.User)
	}
	if !isSID(pl.UserSID) {
		return nil, fmt.Errorf("SID %q of user %s is not a SID", pl.UserSID, pl.User)
	}
	pl.sids[pl.UserSID] = "user " + pl.User

	pl.writable = append(slices.Clone(write), tempDir)

	fp := &filePlanner{pl: pl, exists: exists, write: write, placeholders: map[string]bool{}}
	fp.writeRoots(tempDir)
	fp.carveOuts(readOnly)
	fp.denyPaths(deny)
	slices.SortStableFunc(pl.ACEs, compareACE)
	pl.ACEs = slices.CompactFunc(pl.ACEs, sameACE)
	slices.SortFunc(pl.Placeholders, func(a, b string) int { return strings.Compare(fold(a), fold(b)) })

	pl.Token = Token{
		DisableMaxPrivilege: true,
		WriteRestricted:     true,
		DenyOnly:            []string{SIDBuiltinAdministrators, SIDLocalAccountAndAdministrator, SIDAuthenticatedUsers},
		Restricting:         []string{LogonSID, SIDRestrictedCode},
		IntegrityLevel:      SIDMediumIntegrity,
		DefaultDACL:         defaultDACL,
	}
	for _, w := range write {
		pl.Token.Restricting = append(pl.Token.Restricting, WriteRootSID(w))
	}
	if !host {
		pl.Token.Restricting = append(pl.Token.Restricting, NetworkNoneSID)
		pl.Firewall = FirewallFilters(pl.UserSID)
	}
	if in.Policy.GetChildren().GetAllow() {
		sid := SessionSID(in.SessionID)
		pl.sids[sid] = "session " + in.SessionID + ", granted by its pipe"
		pl.Token.Restricting = append(pl.Token.Restricting, sid)
	}

	if err := refuseUninherited(pl, in.Uninherited, exists, readOnly, deny); err != nil {
		return nil, err
	}

	l := in.Policy.GetLimits()
	pl.Job = Job{
		KillOnClose:             true,
		DieOnUnhandledException: true,
		ActiveProcessLimit:      l.GetPids(),
		JobMemoryLimit:          l.GetMemoryBytes(),
		UIRestrictions:          UIRestrictionsAll,
	}
	if m := l.GetCpuMillis(); m != 0 {
		if in.NumCPU < 1 {
			return nil, fmt.Errorf("limits.cpu_millis: planning a CPU rate needs the host's processor count, got %d", in.NumCPU)
		}
		pl.Job.CPURate = cpuRate(m, in.NumCPU)
	}

	if pl.Env, err = environment(in.Env, tempDir); err != nil {
		return nil, err
	}
	pl.Report = report(in, pl, write, readOnly, deny)
	return pl, nil
}

// policyPaths checks and cleans the paths of field, sorted by key with
// spellings of one path reduced to the first.
func policyPaths(field string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for i, p := range paths {
		if err := refusePath(fmt.Sprintf("%s[%d]", field, i), p); err != nil {
			return nil, err
		}
		out = append(out, cleanPath(p))
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Compare(fold(a), fold(b)) })
	return slices.CompactFunc(out, samePath), nil
}

// cpuRate is a CPU budget of millis thousandths of one processor as a hard
// cap in hundredths of a percent of a machine of n processors, at least
// the smallest rate a job may have and at most the whole machine.
func cpuRate(millis uint32, n int) uint32 {
	r := uint64(millis) * 10000 / (1000 * uint64(n))
	return uint32(min(max(r, 1), 10000))
}

// filePlanner builds the ACEs and placeholders of the filesystem fields.
type filePlanner struct {
	pl     *Plan
	exists func(string) bool
	// write are the clean write roots, none within another.
	write        []string
	placeholders map[string]bool
}

func (f *filePlanner) add(a ACE) { f.pl.ACEs = append(f.pl.ACEs, a) }

// writeRoots grants writes below each write root: Modify to the
// session's logon SID for the normal pass, for the session alone, and to
// the root's SID for the restricting pass, for good (it grants nothing to
// a token without a normal-pass grant too). Every session of a network
// mode runs as one user, whatever its caller, so a grant to that user
// would let any later caller's sandbox read and write this root.
//
// OWNER RIGHTS limited to READ_CONTROL, inherited below the root, takes
// from the owner of what lies there the WRITE_DAC Windows grants an owner
// before it reads any deny entry: the sandbox user owns what earlier
// sessions made, and could otherwise rewrite the ACL of a carve-out or
// deny path it once created.
func (f *filePlanner) writeRoots(tempDir string) {
	if len(f.write) > 0 {
		f.pl.sids[SIDOwnerRights] = "OWNER RIGHTS"
	}
	for _, w := range f.write {
		sid := WriteRootSID(w)
		f.pl.sids[sid] = "write root " + w
		f.add(ACE{Path: w, SID: LogonSID, Allow: true, Mask: ModifyAccess, Inherit: true,
			Field: "filesystem.write", Why: "write root, for this session alone (normal pass)"})
		f.add(ACE{Path: w, SID: sid, Allow: true, Mask: ModifyAccess, Inherit: true, Persistent: true,
			Field: "filesystem.write", Why: "write root, for its own SID (restricting pass)"})
		f.add(ACE{Path: w, SID: SIDOwnerRights, Allow: true, Mask: READ_CONTROL, Inherit: true, Persistent: true,
			Field: "filesystem.write", Why: "write root: an owner, the sandbox user among them, holds no implicit WRITE_DAC below it"})
	}
	f.add(ACE{Path: tempDir, SID: LogonSID, Allow: true, Mask: ModifyAccess, Inherit: true,
		Field: "filesystem.write", Why: "the session's private temporary directory (TEMP, TMP)"})
}

// carveOuts denies every write below each carve-out to the session's logon
// SID. It is keyed on the logon SID, an enabled group, rather than on a
// restricting SID, because a write-restricted token's restricting pass
// covers only the rights GENERIC_WRITE maps to: DELETE, WRITE_DAC and
// WRITE_OWNER are decided by the normal pass alone, where the write root's
// grant to the sandbox user would allow them. The directories between the
// write root and the carve-out may not be deleted either: renamed away, the
// carve-out would no longer be at its path, and a new directory the sandbox
// made there would be writable.
func (f *filePlanner) carveOuts(readOnly []string) {
	for _, c := range readOnly {
		root := outermost(c, f.write)
		f.placeholder(c, root)
		f.add(ACE{Path: c, SID: LogonSID, Mask: WriteAccess, Inherit: true,
			Field: "filesystem.read_only", Why: "carve-out: nothing below it is written, deleted or re-permissioned"})
		for _, a := range ancestorsBetween(root, c) {
			f.add(ACE{Path: a, SID: LogonSID, Mask: DELETE,
				Field: "filesystem.read_only", Why: "keeps carve-out " + c + " in place"})
		}
	}
}

// denyPaths denies all access below each deny path to the session's
// logon SID, which the token has as an enabled group: the normal pass
// refuses reads as well as writes. No other session has the logon SID, so
// the entries go when the session ends.
func (f *filePlanner) denyPaths(deny []string) {
	for _, d := range deny {
		root := outermost(d, f.write)
		if root == "" && !f.exists(d) {
			// Outside every write root the sandbox cannot create it, so
			// there is nothing to read or write.
			continue
		}
		f.placeholder(d, root)
		f.add(ACE{Path: d, SID: LogonSID, Mask: FILE_ALL_ACCESS, Inherit: true,
			Field: "filesystem.deny", Why: "deny path: neither read, written nor executed"})
		for _, a := range ancestorsBetween(root, d) {
			f.add(ACE{Path: a, SID: LogonSID, Mask: DELETE,
				Field: "filesystem.deny", Why: "keeps deny path " + d + " in place"})
		}
	}
}

// placeholder reports whether p does not exist, and lists it and the
// missing directories above it, inside root, as placeholders.
func (f *filePlanner) placeholder(p, root string) bool {
	if f.exists(p) {
		return false
	}
	missing := []string{p}
	above := ancestorsBetween(root, p)
	for i := len(above) - 1; i >= 0 && !f.exists(above[i]); i-- {
		missing = append(missing, above[i])
	}
	for _, m := range missing {
		if k := fold(m); !f.placeholders[k] {
			f.placeholders[k] = true
			f.pl.Placeholders = append(f.pl.Placeholders, m)
		}
	}
	return true
}

// compareACE orders ACEs by path, directories before what lies below
// them, and on one path denies first.
func compareACE(a, b ACE) int {
	return cmp.Or(
		strings.Compare(fold(a.Path), fold(b.Path)),
		cmpBool(a.Allow, b.Allow),
		strings.Compare(a.SID, b.SID),
		cmp.Compare(a.Mask, b.Mask),
		cmpBool(a.Inherit, b.Inherit),
		cmpBool(a.Persistent, b.Persistent),
	)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// sameACE reports whether two ACEs grant or deny the same thing: two deny
// paths share the directories above them.
func sameACE(a, b ACE) bool {
	return samePath(a.Path, b.Path) && a.SID == b.SID && a.Allow == b.Allow && a.Mask == b.Mask &&
		a.Inherit == b.Inherit && a.Persistent == b.Persistent
}
