package launcherwindows

import (
	"errors"
	"slices"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// restrictedBits are the rights the restricting pass of a write-restricted
// token decides: those GENERIC_WRITE maps to for files, less READ_CONTROL
// and SYNCHRONIZE, which reading asks for too. DELETE, FILE_DELETE_CHILD,
// WRITE_DAC and WRITE_OWNER are the normal pass's alone.
const restrictedBits = FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES

// hostWithheld are the rights the model assumes the host's own ACLs give
// the sandbox user through none of its groups: Windows grants them to
// owners, administrators and Authenticated Users, which the token makes
// deny-only, and the sandbox users own nothing outside the write roots.
const hostWithheld = DELETE | FILE_DELETE_CHILD | WRITE_DAC | WRITE_OWNER

// aclModel decides access the way Windows does for the ACEs of a plan,
// assuming the worst of the host: below whatever the plan stamps, the
// host's own ACLs grant the sandbox user everything but hostWithheld (the
// normal pass) and none of the token's restricting SIDs anything (the
// restricting pass).
type aclModel struct {
	pl          *Plan
	explicit    map[string][]ACE
	normal      map[string]bool
	restricting map[string]bool
	// owned are objects the sandbox user owns: earlier sessions made
	// them. An owner holds READ_CONTROL and WRITE_DAC before any entry is
	// read, unless an OWNER RIGHTS entry says what it holds.
	owned map[string]bool
	// protected are objects whose DACL inherits nothing from above them.
	protected map[string]bool
	// private are directories whose own ACLs grant the sandbox user
	// nothing, below which the host grants nothing either: another
	// caller's home, say.
	private []string
}

func newACLModel(pl *Plan) *aclModel {
	m := &aclModel{pl: pl, explicit: map[string][]ACE{}, normal: map[string]bool{pl.UserSID: true, LogonSID: true}, restricting: map[string]bool{},
		owned: map[string]bool{}, protected: map[string]bool{}}
	for _, a := range pl.ACEs {
		k := pathKey(a.Path)
		m.explicit[k] = append(m.explicit[k], a)
	}
	for k, aces := range m.explicit {
		// A DACL in canonical order: denies before allows.
		slices.SortStableFunc(aces, func(a, b ACE) int { return cmpBool(a.Allow, b.Allow) })
		m.explicit[k] = aces
	}
	for _, s := range pl.Token.Restricting {
		m.restricting[s] = true
	}
	return m
}

// effective is the DACL of p: its own entries, then those inherited from
// each directory above it, nearest first, up to a protected DACL.
func (m *aclModel) effective(p string) []ACE {
	p = cleanPath(p)
	out := slices.Clone(m.explicit[fold(p)])
	if m.protected[fold(p)] {
		return out
	}
	for d := parent(p); ; d = parent(d) {
		for _, a := range m.explicit[fold(d)] {
			if a.Inherit {
				out = append(out, a)
			}
		}
		if isVolumeRoot(d) || m.protected[fold(d)] {
			return out
		}
	}
}

// belowProtected reports whether p's DACL is, or inherits from, a
// protected one, which no host ACL above reaches.
func (m *aclModel) belowProtected(p string) bool {
	for d := cleanPath(p); ; d = parent(d) {
		if m.protected[fold(d)] {
			return true
		}
		if isVolumeRoot(d) {
			return false
		}
	}
}

// plant adds to the model what an earlier session, or the host, left on
// objs: their allow entries, ahead of what they inherit, their protection
// and who owns them.
func (m *aclModel) plant(objs ...Object) {
	for _, o := range objs {
		k := fold(cleanPath(o.Path))
		for _, g := range o.Allows {
			m.explicit[k] = append(m.explicit[k], ACE{Path: o.Path, SID: g.SID, Allow: true, Mask: g.Mask, Inherit: true})
		}
		m.protected[k] = o.Protected
		m.owned[k] = o.Owner.SID == m.pl.UserSID
	}
}

// pass walks p's DACL for sids; rest decides the rights no entry decided.
func (m *aclModel) pass(p string, want uint32, sids map[string]bool, rest func(uint32) bool) bool {
	for _, a := range m.effective(p) {
		if !sids[a.SID] {
			continue
		}
		if !a.Allow && a.Mask&want != 0 {
			return false
		}
		if a.Allow {
			want &^= a.Mask
		}
		if want == 0 {
			return true
		}
	}
	return rest(want)
}

func (m *aclModel) granted(p string, want uint32) bool {
	host := func(rest uint32) bool { return rest&hostWithheld == 0 }
	if anyWithin(cleanPath(p), m.private) || m.belowProtected(p) {
		host = func(rest uint32) bool { return rest == 0 }
	}
	if m.owned[fold(cleanPath(p))] {
		implicit := READ_CONTROL | WRITE_DAC
		for _, a := range m.effective(p) {
			if a.SID == SIDOwnerRights {
				implicit = 0
				if a.Allow {
					implicit = a.Mask
				}
				break
			}
		}
		want &^= implicit
	}
	if !m.pass(p, want, m.normal, host) {
		return false
	}
	w := want & restrictedBits
	return w == 0 || m.pass(p, w, m.restricting, func(uint32) bool { return false })
}

func (m *aclModel) canRead(p string) bool      { return m.granted(p, FILE_READ_DATA) }
func (m *aclModel) canWrite(p string) bool     { return m.granted(p, FILE_WRITE_DATA) }
func (m *aclModel) canChangeACL(p string) bool { return m.granted(p, WRITE_DAC) }

// canRemove: deleting or renaming p takes DELETE on it or
// FILE_DELETE_CHILD on its parent.
func (m *aclModel) canRemove(p string) bool {
	return m.granted(p, DELETE) || m.granted(parent(cleanPath(p)), FILE_DELETE_CHILD)
}

// expectation is what a policy promises, worked out from the policy
// rather than from the plan.
type expectation struct {
	write, readOnly, deny []string
	tempDir               string
	exists                func(string) bool
}

func expect(in planInput) expectation {
	e := expectation{tempDir: cleanPath(in.TempDir), exists: in.Exists}
	if e.exists == nil {
		e.exists = func(string) bool { return true }
	}
	fs := in.Policy.GetFilesystem()
	clean := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			out = append(out, cleanPath(p))
		}
		return out
	}
	ro, deny := clean(fs.GetReadOnly()), clean(fs.GetDeny())
	all := clean(fs.GetWrite())
	for _, w := range all {
		if anyWithin(w, ro) || anyWithin(w, deny) {
			continue
		}
		e.write = append(e.write, w)
	}
	e.write = slices.DeleteFunc(e.write, func(w string) bool {
		return slices.ContainsFunc(e.write, func(o string) bool { return !samePath(o, w) && within(w, o) })
	})
	for _, c := range ro {
		if anyWithin(c, e.write) {
			e.readOnly = append(e.readOnly, c)
		}
	}
	for _, d := range deny {
		if anyWithin(d, e.write) || e.exists(d) {
			e.deny = append(e.deny, d)
		}
	}
	return e
}

func anyWithin(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return within(p, r) })
}

// rootOf is the write root p lies within, "" for none.
func (e expectation) rootOf(p string) string {
	for _, w := range e.write {
		if within(p, w) {
			return w
		}
	}
	return ""
}

// checkSemantics decides from the ACEs alone what the sandbox may do and
// compares it with what the policy promises.
func checkSemantics(t *testing.T, in planInput, pl *Plan) {
	t.Helper()
	m := newACLModel(pl)
	e := expect(in)
	nearTemp := func(p string) bool { return within(p, e.tempDir) || within(e.tempDir, p) }
	protected := func(p string) bool { return anyWithin(p, e.readOnly) || anyWithin(p, e.deny) }
	for _, w := range e.write {
		for _, q := range []string{w + `\sbd-probe`, w + `\sbd-dir\sbd-probe`} {
			if protected(q) || nearTemp(q) {
				continue
			}
			if !m.canWrite(q) || !m.canRemove(q) || !m.canRead(q) {
				t.Errorf("write root %s: %s not readable, writable and removable", w, q)
			}
		}
		if !protected(w) && !nearTemp(w) && !m.canWrite(w) {
			t.Errorf("write root %s: nothing can be created in it", w)
		}
	}
	// A write root inside a carve-out or a deny path is never written,
	// whether or not the carve-out lies within another write root.
	fs := in.Policy.GetFilesystem()
	for _, w := range fs.GetWrite() {
		w = cleanPath(w)
		inside := slices.ContainsFunc(append(slices.Clone(fs.GetReadOnly()), fs.GetDeny()...), func(p string) bool { return within(w, cleanPath(p)) })
		if inside && !nearTemp(w) && m.canWrite(w+`\sbd-probe`) {
			t.Errorf("write root %s lies within a carve-out or deny path, yet is writable", w)
		}
	}
	if !protected(e.tempDir) && (!m.canWrite(e.tempDir+`\x`) || !m.canRemove(e.tempDir+`\x`)) {
		t.Errorf("temporary directory %s is not writable", e.tempDir)
	}
	for _, c := range e.readOnly {
		if nearTemp(c) {
			continue
		}
		for _, q := range []string{c, c + `\sbd-probe`, c + `\sub\sbd-probe`} {
			if m.canWrite(q) || m.canRemove(q) || m.canChangeACL(q) {
				t.Errorf("carve-out %s: %s writable, removable or its ACL changeable", c, q)
			}
		}
		if !anyWithin(c, e.deny) && !m.canRead(c+`\sbd-probe`) {
			t.Errorf("carve-out %s is not readable", c)
		}
		for _, a := range ancestorsBetween(e.rootOf(c), c) {
			if m.canRemove(a) {
				t.Errorf("carve-out %s: the directory %s above it can be renamed away", c, a)
			}
		}
	}
	for _, d := range e.deny {
		if nearTemp(d) {
			continue
		}
		for _, q := range []string{d, d + `\sbd-probe`} {
			if m.canRead(q) || m.canWrite(q) || m.canRemove(q) {
				t.Errorf("deny path %s: %s readable, writable or removable", d, q)
			}
		}
		for _, a := range ancestorsBetween(e.rootOf(d), d) {
			if m.canRemove(a) {
				t.Errorf("deny path %s: the directory %s above it can be renamed away", d, a)
			}
		}
	}
	for _, q := range []string{`Q:\sbd-outside\probe`, `C:\sbd-outside\probe`, `\\sbd-server\share\probe`} {
		if anyWithin(q, e.write) || nearTemp(q) {
			continue
		}
		if m.canWrite(q) || m.canRemove(q) {
			t.Errorf("%s, outside every write root, is writable or removable", q)
		}
		if !protected(q) && !m.canRead(q) {
			t.Errorf("%s is not readable under read ALL", q)
		}
	}
}

// checkInvariants holds for every plan, whatever the policy.
func checkInvariants(t *testing.T, in planInput, pl *Plan) {
	t.Helper()
	e := expect(in)
	host := in.Policy.GetNetwork().GetMode() == sandboxdv1.Network_HOST
	placeholder := map[string]bool{}
	for i, p := range pl.Placeholders {
		placeholder[pathKey(p)] = true
		if e.exists(p) {
			t.Errorf("placeholder %s exists already", p)
		}
		if e.rootOf(p) == "" {
			t.Errorf("placeholder %s is outside every write root", p)
		}
		for _, q := range pl.Placeholders[i+1:] {
			if within(p, q) {
				t.Errorf("placeholder %s comes after %s, which is above it", p, q)
			}
		}
	}
	hasACE := func(path, sid string, allow bool, mask uint32, inherit bool) bool {
		return slices.ContainsFunc(pl.ACEs, func(a ACE) bool {
			return samePath(a.Path, path) && a.SID == sid && a.Allow == allow && a.Mask&mask == mask && a.Inherit == inherit
		})
	}
	for _, c := range e.readOnly {
		if !hasACE(c, LogonSID, false, WriteAccess, true) {
			t.Errorf("carve-out %s has no inherited deny of writes for the logon SID", c)
		}
		if !e.exists(c) && !placeholder[pathKey(c)] {
			t.Errorf("missing carve-out %s is not a placeholder", c)
		}
		for _, a := range ancestorsBetween(e.rootOf(c), c) {
			if !hasACE(a, LogonSID, false, DELETE, false) {
				t.Errorf("carve-out %s: no deny of DELETE on %s above it", c, a)
			}
		}
	}
	for _, d := range e.deny {
		if !hasACE(d, LogonSID, false, FILE_ALL_ACCESS, true) {
			t.Errorf("deny path %s has no inherited deny of all access for the logon SID", d)
		}
		if !e.exists(d) && !placeholder[pathKey(d)] {
			t.Errorf("missing deny path %s is not a placeholder", d)
		}
	}
	for _, a := range pl.ACEs {
		switch {
		case a.Allow && !(anyWithin(a.Path, e.write) || samePath(a.Path, e.tempDir)):
			t.Errorf("allow entry outside the write roots and the temporary directory: %+v", a)
		case a.Allow && (a.Mask&^ModifyAccess != 0 || !a.Inherit):
			t.Errorf("allow entry grants more than an inherited Modify: %+v", a)
		case a.Allow && a.Persistent && a.Mask&DELETE != 0 && a.SID == pl.UserSID:
			t.Errorf("persistent allow of DELETE to the sandbox user, which every later session would hold: %+v", a)
		case !a.Allow && a.Inherit && !slices.ContainsFunc(append(slices.Clone(e.readOnly), e.deny...), func(p string) bool { return samePath(p, a.Path) }):
			t.Errorf("inherited deny on %s, which is no carve-out or deny path itself", a.Path)
		case !a.Allow && !a.Inherit && a.Mask != DELETE:
			t.Errorf("an entry for one directory above a protected path denies more than DELETE: %+v", a)
		case !a.Inherit && (e.rootOf(a.Path) == "" || samePath(e.rootOf(a.Path), a.Path)):
			t.Errorf("an entry for one directory is not strictly inside a write root: %+v", a)
		case a.Persistent && (a.SID == LogonSID || placeholder[pathKey(a.Path)]):
			t.Errorf("persistent entry keyed on the logon SID or on a placeholder: %+v", a)
		case a.Field == "" || a.Why == "":
			t.Errorf("entry without field or reason: %+v", a)
		}
	}

	tok := pl.Token
	if !tok.DisableMaxPrivilege || !tok.WriteRestricted || tok.IntegrityLevel != SIDMediumIntegrity || tok.DefaultDACL != "D:(A;;GA;;;LOGON)(A;;GA;;;SY)(A;;RC;;;OW)" {
		t.Errorf("token: %+v", tok)
	}
	if !slices.Equal(tok.DenyOnly, []string{SIDBuiltinAdministrators, SIDLocalAccountAndAdministrator, SIDAuthenticatedUsers}) {
		t.Errorf("deny-only SIDs %v", tok.DenyOnly)
	}
	want := []string{LogonSID, SIDRestrictedCode}
	for _, w := range e.write {
		want = append(want, WriteRootSID(w))
	}
	for _, s := range want {
		if !slices.Contains(tok.Restricting, s) {
			t.Errorf("restricting SIDs %v lack %s", tok.Restricting, s)
		}
	}
	if got := slices.Contains(tok.Restricting, NetworkNoneSID); got == host {
		t.Errorf("network HOST %v, NetworkNoneSID restricting %v", host, got)
	}
	if got := slices.Contains(tok.Restricting, SessionSID(in.SessionID)); got != in.Policy.GetChildren().GetAllow() {
		t.Errorf("children.allow %v, session SID restricting %v", in.Policy.GetChildren().GetAllow(), got)
	}
	if host {
		if pl.User != OnlineUser || pl.UserSID != in.OnlineSID || len(pl.Firewall) != 0 {
			t.Errorf("network HOST runs as %s %s with %d filters", pl.User, pl.UserSID, len(pl.Firewall))
		}
	} else {
		if pl.User != OfflineUser || pl.UserSID != in.OfflineSID {
			t.Errorf("network NONE runs as %s %s", pl.User, pl.UserSID)
		}
		checkFilters(t, pl.Firewall, in.OfflineSID)
	}

	j := pl.Job
	if !j.KillOnClose || !j.DieOnUnhandledException || j.UIRestrictions != 0xFF {
		t.Errorf("job: %+v", j)
	}
	l := in.Policy.GetLimits()
	if j.JobMemoryLimit != l.GetMemoryBytes() || j.ActiveProcessLimit != l.GetPids() || (j.CPURate == 0) != (l.GetCpuMillis() == 0) || j.CPURate > 10000 {
		t.Errorf("job %+v for limits %v", j, l)
	}
	if pl.Desktop != DesktopName {
		t.Errorf("desktop %q", pl.Desktop)
	}

	checkEnvBlock(t, pl.Env, e.tempDir)
	fields := map[string]bool{}
	for _, f := range pl.Report {
		if f.GetMechanism() == "" || fields[f.GetField()] {
			t.Errorf("report entry %v empty or repeated", f)
		}
		fields[f.GetField()] = true
	}
	for _, f := range []string{"filesystem.read", "filesystem.write", "filesystem.read_only", "filesystem.deny", "network.mode", "process"} {
		if !fields[f] {
			t.Errorf("report lacks %s", f)
		}
	}
	r := pl.Render()
	if r != pl.Render() || !strings.HasSuffix(r, "\n") {
		t.Errorf("Render is not stable or not line-terminated")
	}
	for _, a := range pl.ACEs {
		if !strings.Contains(r, show(a.Path)) {
			t.Errorf("Render lacks %s", a.Path)
		}
	}
}

func checkFilters(t *testing.T, fs []Filter, offlineSID string) {
	t.Helper()
	layers, ids := map[string]bool{}, map[string]bool{}
	for _, f := range fs {
		if f.Action != "block" || f.UserSDDL != "D:(A;;CC;;;"+offlineSID+")(A;;CC;;;"+NetworkNoneSID+")" || f.Name == "" {
			t.Errorf("filter %+v", f)
		}
		layers[f.Layer], ids[f.ID] = true, true
	}
	for _, l := range []string{"ALE_AUTH_CONNECT", "ALE_AUTH_RECV_ACCEPT", "ALE_AUTH_LISTEN", "ALE_RESOURCE_ASSIGNMENT"} {
		if !layers[l+"_V4"] || !layers[l+"_V6"] {
			t.Errorf("no block at %s for IPv4 and IPv6: %v", l, layers)
		}
	}
	if len(fs) != 8 || len(ids) != 8 {
		t.Errorf("%d filters with %d distinct IDs, want 8", len(fs), len(ids))
	}
}

func checkEnvBlock(t *testing.T, env []string, tempDir string) {
	t.Helper()
	upper := func(kv string) string {
		n, err := envName(kv)
		if err != nil {
			t.Fatalf("env entry %q: %v", kv, err)
		}
		return strings.ToUpper(n)
	}
	for i := 1; i < len(env); i++ {
		if upper(env[i-1]) >= upper(env[i]) {
			t.Errorf("env not sorted case-insensitively or repeated: %q before %q", env[i-1], env[i])
		}
	}
	for _, kv := range []string{"TEMP=" + tempDir, "TMP=" + tempDir} {
		if !slices.Contains(env, kv) {
			t.Errorf("env lacks %s: %q", kv, env)
		}
	}
}

func isUnenforceable(err error, field string) bool {
	var u *launcher.Unenforceable
	return errors.As(err, &u) && strings.HasPrefix(u.Field, field) && u.Mechanism != "" && u.Found != "" && u.Remedy != ""
}
