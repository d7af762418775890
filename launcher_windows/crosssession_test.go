package launcherwindows

import (
	"slices"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// afterSession is the model of what a later session of the same sandbox
// user meets once pl's session has ended: the persistent entries alone,
// and a logon SID of its own (so none of pl's per-session grants).
func afterSession(pl *Plan) *aclModel {
	later := *pl
	later.ACEs = slices.DeleteFunc(slices.Clone(pl.ACEs), func(a ACE) bool { return !a.Persistent })
	later.Token.Restricting = slices.DeleteFunc(slices.Clone(pl.Token.Restricting), func(s string) bool { return s == LogonSID })
	m := newACLModel(&later)
	delete(m.normal, LogonSID)
	return m
}

// Files an earlier session made are owned by the sandbox user, whose
// implicit WRITE_DAC Windows grants before any deny entry is read: a
// later session with .git read-only must still not rewrite .git's ACL
// (issue 29 item 1).
func TestEarlierSessionsFilesDoNotBypassCarveOuts(t *testing.T) {
	const ws, git = `C:\Users\dev\project`, `C:\Users\dev\project\.git`
	pl := plan(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, ReadOnly: []string{git}, Deny: []string{ws + `\.env`}}}))
	m := newACLModel(pl)
	m.owned = map[string]bool{fold(git): true, fold(git + `\config`): true, fold(ws + `\.env`): true}
	for _, p := range []string{git, git + `\config`} {
		if m.canChangeACL(p) || m.canWrite(p) {
			t.Errorf("%s, made by an earlier session: its ACL can be rewritten, or it written", p)
		}
	}
	if m.canChangeACL(ws+`\.env`) || m.canRead(ws+`\.env`) {
		t.Errorf("deny path made by an earlier session: its ACL can be rewritten, or it read")
	}
}

// plantedHost reports objs as the backend's walk below a path does.
func plantedHost(objs ...Object) func(string) ([]Object, error) {
	return func(p string) ([]Object, error) {
		var out []Object
		for _, o := range objs {
			if within(cleanPath(o.Path), cleanPath(p)) {
				out = append(out, o)
			}
		}
		return out, nil
	}
}

// Windows reads an object's own entries before those it inherits, and a
// protected DACL inherits nothing: what an earlier session of the shared
// sandbox user gave an object it made below a carve-out or deny path (a
// DACL given at creation needs no WRITE_DAC) would beat the deny entries
// the plan stamps above it. Such a plan is refused, naming the object.
func TestPlantedEntriesBelowCarveOutsAreRefused(t *testing.T) {
	const ws = `C:\w`
	hooks, secret := ws+`\.git\hooks`, ws+`\.env\token`
	hook := hooks + `\pre-commit`
	sandbox := Trustee{SID: testOfflineSID, User: true}
	all := func(ts ...Trustee) []Grant {
		var out []Grant
		for _, t := range ts {
			out = append(out, Grant{Trustee: t, Mask: FILE_ALL_ACCESS})
		}
		return out
	}
	carveOut := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, ReadOnly: []string{ws + `\.git`}}}
	denyPath := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, Deny: []string{ws + `\.env`}}}
	for _, c := range []struct {
		name, field string
		pol         *sandboxdv1.Policy
		obj         Object
		// undone says what the sandbox could do were the plan taken;
		// nil for what the model cannot tell.
		undone func(*aclModel) bool
	}{
		{"explicit allow to the user and RESTRICTED", "filesystem.read_only", carveOut,
			Object{Path: hook, Owner: sandbox, Allows: all(sandbox, Trustee{SID: SIDRestrictedCode})},
			func(m *aclModel) bool { return m.canWrite(hook) }},
		{"explicit allow to the user and the write root's SID", "filesystem.read_only", carveOut,
			Object{Path: hook, Owner: sandbox, Allows: all(sandbox, Trustee{SID: WriteRootSID(ws)})},
			func(m *aclModel) bool { return m.canWrite(hook) }},
		{"inheritable allow on a directory", "filesystem.read_only", carveOut,
			Object{Path: hooks, Owner: sandbox, Allows: all(sandbox, Trustee{SID: SIDRestrictedCode})},
			func(m *aclModel) bool { return m.canWrite(hook) }},
		{"inherit-only CREATOR OWNER", "filesystem.read_only", carveOut,
			Object{Path: hooks, Allows: []Grant{{Trustee: Trustee{SID: "S-1-3-0"}, Mask: GENERIC_ALL}}}, nil},
		{"explicit allow to Everyone", "filesystem.deny", denyPath,
			Object{Path: secret, Allows: []Grant{{Trustee: Trustee{SID: "S-1-1-0"}, Mask: FILE_GENERIC_READ}}}, nil},
		{"explicit allow to the user", "filesystem.deny", denyPath,
			Object{Path: secret, Owner: sandbox, Allows: all(sandbox)},
			func(m *aclModel) bool { return m.canRead(secret) }},
		{"an entry of unread kind", "filesystem.deny", denyPath,
			Object{Path: secret, Allows: []Grant{{Mask: FILE_READ_DATA}}}, nil},
		{"protected, granting the user", "filesystem.deny", denyPath,
			Object{Path: secret, Protected: true, Allows: all(sandbox)},
			func(m *aclModel) bool { return m.canRead(secret) }},
		{"protected, owned by the user", "filesystem.read_only", carveOut,
			Object{Path: hook, Protected: true, Owner: sandbox},
			func(m *aclModel) bool { return m.canChangeACL(hook) }},
	} {
		in := input(c.pol)
		in.Uninherited = plantedHost(c.obj)
		pl, err := newPlan(in)
		if err == nil {
			m := newACLModel(pl)
			m.plant(c.obj)
			if c.undone == nil || c.undone(m) {
				t.Errorf("%s: the plan is taken, and the sandbox may do below the %s what it denies", c.name, c.field)
			}
			continue
		}
		if !isUnenforceable(err, c.field) || !strings.Contains(err.Error(), c.obj.Path) {
			t.Errorf("%s: %v, want refused for %s, naming %s", c.name, err, c.field, c.obj.Path)
		}
	}
	in := input(carveOut)
	in.Uninherited = nil
	if _, err := newPlan(in); !isUnenforceable(err, "filesystem.read_only") {
		t.Errorf("a carve-out with nothing to say what lies below it: %v, want refused", err)
	}
}

// The sandbox may traverse to any object it may read, so a deny path
// outside every write root is checked below as one inside: the host may
// have given a file there a DACL of its own.
func TestUninheritedObjectsBelowOutsideDenyPathsAreRefused(t *testing.T) {
	const ssh = `C:\Users\dev\.ssh`
	key := ssh + `\id_ed25519`
	sandbox := Trustee{SID: testOfflineSID, User: true}
	for _, c := range []struct {
		name   string
		obj    Object
		undone func(*aclModel) bool
	}{
		{"protected, granting the sandbox user", Object{Path: key, Protected: true, Allows: []Grant{{Trustee: sandbox, Mask: FILE_GENERIC_READ}}},
			func(m *aclModel) bool { return m.canRead(key) }},
		{"explicit allow to Users", Object{Path: key, Allows: []Grant{{Trustee: Trustee{SID: "S-1-5-32-545"}, Mask: FILE_GENERIC_READ}}}, nil},
	} {
		for _, write := range [][]string{nil, {`C:\work`}} {
			in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: write, Deny: []string{ssh}}})
			in.Uninherited = plantedHost(c.obj)
			pl, err := newPlan(in)
			if err == nil {
				m := newACLModel(pl)
				m.plant(c.obj)
				if c.undone == nil || c.undone(m) {
					t.Errorf("%s, write roots %q: the plan is taken, and the sandbox may read below the deny path", c.name, write)
				}
				continue
			}
			if !isUnenforceable(err, "filesystem.deny") || !strings.Contains(err.Error(), key) {
				t.Errorf("%s, write roots %q: %v, want refused for filesystem.deny, naming %s", c.name, write, err, key)
			}
		}
	}
	in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{ssh}}})
	in.Uninherited = nil
	if _, err := newPlan(in); !isUnenforceable(err, "filesystem.deny") {
		t.Errorf("a deny path outside the write roots with nothing to say what lies below it: %v, want refused", err)
	}
	in.Exists = missing(ssh)
	if _, err := newPlan(in); err != nil {
		t.Errorf("a missing deny path outside the write roots, which is not stamped: %v", err)
	}
}

// What no sandbox token holds does not refuse a plan: another user's key
// with a protected DACL, and the entries another policy's write root
// nested in a carve-out keeps (its own SID, OWNER RIGHTS, another
// session's logon SID).
func TestForeignEntriesBelowCarveOutsAreTaken(t *testing.T) {
	const ws = `C:\w`
	key, nested := ws+`\keys\id_ed25519`, ws+`\.git\worktrees\w1`
	dev := Trustee{SID: "S-1-5-21-1111111111-2222222222-3333333333-1000", User: true}
	objs := []Object{
		{Path: key, Protected: true, Owner: dev, Allows: []Grant{
			{Trustee: dev, Mask: FILE_ALL_ACCESS},
			{Trustee: Trustee{SID: SIDLocalSystem}, Mask: FILE_ALL_ACCESS},
			{Trustee: Trustee{SID: SIDBuiltinAdministrators}, Mask: FILE_ALL_ACCESS},
		}},
		{Path: nested, Owner: dev, Allows: []Grant{
			{Trustee: Trustee{SID: WriteRootSID(nested)}, Mask: ModifyAccess},
			{Trustee: Trustee{SID: SIDOwnerRights}, Mask: READ_CONTROL},
			{Trustee: Trustee{SID: "S-1-5-5-0-4242"}, Mask: ModifyAccess},
		}},
	}
	in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, ReadOnly: []string{ws + `\.git`}, Deny: []string{ws + `\keys`}}})
	in.Uninherited = plantedHost(objs...)
	pl := plan(t, in)
	m := newACLModel(pl)
	m.plant(objs...)
	if m.canRead(key) || m.canWrite(nested+`\x`) || m.canChangeACL(nested) {
		t.Errorf("what the foreign entries allow reaches the sandbox")
	}
}

// One caller's sandbox must not read another caller's past write roots:
// every session of a network mode runs as one user, so no grant to that
// user may outlive the session (issue 29 item 2).
func TestNoReadGrantOutlivesTheSession(t *testing.T) {
	const alice = `C:\Users\alice\project`
	pl := plan(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{alice}}}))
	now := newACLModel(pl)
	now.private = []string{`C:\Users\alice`}
	if !now.canRead(alice+`\main.go`) || !now.canWrite(alice+`\main.go`) {
		t.Fatalf("alice's own session cannot read and write her write root")
	}
	later := afterSession(pl)
	later.private = []string{`C:\Users\alice`}
	for _, p := range []string{alice + `\main.go`, alice} {
		if later.canRead(p) || later.canWrite(p) {
			t.Errorf("%s: readable or writable by a later session of the same sandbox user", p)
		}
	}
	for _, a := range pl.ACEs {
		if a.Persistent && a.Allow && a.SID == pl.UserSID {
			t.Errorf("persistent grant to the shared sandbox user: %+v", a)
		}
	}
}

// A child's processes must count against its parent's memory, pids and
// CPU limits. Each session's job object is a top-level job here, so a
// child of a limited parent is refused (issue 29 item 3).
func TestChildOfLimitedParentIsRefused(t *testing.T) {
	for field, l := range map[string]*sandboxdv1.Limits{
		"limits.memory_bytes": {MemoryBytes: 1 << 30},
		"limits.pids":         {Pids: 10},
		"limits.cpu_millis":   {CpuMillis: 500},
	} {
		in := input(&sandboxdv1.Policy{Limits: l})
		if _, err := newPlan(in); err != nil {
			t.Errorf("%s: a root session: %v", field, err)
		}
		in.Child = true
		if _, err := newPlan(in); !isUnenforceable(err, field) {
			t.Errorf("%s: a child session: %v, want refused", field, err)
		}
	}
	in := input(&sandboxdv1.Policy{Limits: &sandboxdv1.Limits{OutputBytes: 100}})
	in.Child = true
	if _, err := newPlan(in); err != nil {
		t.Errorf("a child without job limits: %v", err)
	}
}

// The pseudo console's host process would run as the daemon, LocalSystem,
// outside the session's job (issue 29 item 4).
func TestTerminalSessionIsRefused(t *testing.T) {
	in := input(nil)
	in.Terminal = true
	if _, err := newPlan(in); !isUnenforceable(err, "process") {
		t.Errorf("a PTY session: %v, want refused", err)
	}
}

// A non-administrator may have the service stamp entries only where it
// could change the ACL itself: every path the plan stamps outside its
// write roots is one whose owner the daemon checks (issue 29 item 5).
func TestOwnershipChecksCoverEveryStampedPath(t *testing.T) {
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{`C:\w`},
		ReadOnly: []string{`C:\w\.git`, `C:\Windows\System32\config`},
		Deny:     []string{`C:\w\.env`, `C:\Users\other\.ssh`, `D:\secrets`},
	}}
	pl := plan(t, input(pol))
	checks := OwnershipChecks(pol)
	for _, a := range pl.ACEs {
		if samePath(a.Path, testTempDir) {
			continue
		}
		if !slices.ContainsFunc(checks, func(c PathCheck) bool { return within(a.Path, cleanPath(c.Path)) }) {
			t.Errorf("%s is stamped, yet no ownership check covers it: %v", a.Path, checks)
		}
	}
	for _, c := range checks {
		if c.Field == "" {
			t.Errorf("check %+v names no field", c)
		}
	}
}

// The job's limits mean other things than a cgroup's: the report says so
// (issue 29 item 6).
func TestReportSaysWhatJobLimitsMean(t *testing.T) {
	pl := plan(t, input(&sandboxdv1.Policy{Limits: &sandboxdv1.Limits{MemoryBytes: 1 << 20, Pids: 7}}))
	fields := map[string]string{}
	for _, f := range pl.Report {
		fields[f.GetField()] = f.GetMechanism()
	}
	for field, want := range map[string]string{
		"limits.pids":         "processes, not threads",
		"limits.memory_bytes": "killed",
	} {
		if !strings.Contains(fields[field], want) {
			t.Errorf("%s: %q does not say %q", field, fields[field], want)
		}
	}
}

// CreateProcessAsUser opens the program as LocalSystem after the daemon
// checked, as the sandbox, that it may run it: a program another session
// can swap in between is refused (issue 29 item 7).
func TestProgramInWriteRootIsRefused(t *testing.T) {
	pl := plan(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\w`}}}))
	for prog, refused := range map[string]bool{
		`C:\w\build\app.exe`:           true,
		`C:\W\tool.exe`:                true,
		testTempDir + `\x.exe`:         true,
		`C:\Windows\System32\cmd.exe`:  false,
		`C:\Program Files\Git\git.exe`: false,
		`C:\wide\app.exe`:              false,
	} {
		err := pl.RefuseProgram(prog)
		if refused != isUnenforceable(err, "process") {
			t.Errorf("%s: %v, want refused %v", prog, err, refused)
		}
	}
}
