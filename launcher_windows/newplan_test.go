package launcherwindows

import (
	"slices"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	testSession    = "0123456789abcdef"
	testOfflineSID = "S-1-5-21-1111111111-2222222222-3333333333-1001"
	testOnlineSID  = "S-1-5-21-1111111111-2222222222-3333333333-1002"
	testTempDir    = `C:\ProgramData\sandboxd\tmp\` + testSession
)

// testEnv is what the daemon passes on Windows, TEMP included: the plan
// replaces it.
var testEnv = []string{
	`SystemRoot=C:\Windows`, `windir=C:\Windows`, `ComSpec=C:\Windows\system32\cmd.exe`,
	`PATH=C:\Windows\system32;C:\Windows`, `PATHEXT=.COM;.EXE;.BAT;.CMD`,
	`USERPROFILE=C:\Users\sandboxd-offline`, `HOME=C:\Users\sandboxd-offline`,
	"SANDBOXD_SESSION=" + testSession, "SANDBOXD_POLICY_DIGEST=sha256:00", `TEMP=C:\Windows\Temp`,
}

// missing is an Exists under which the listed paths, and everything below
// them, do not exist.
func missing(paths ...string) func(string) bool {
	return func(p string) bool {
		return !slices.ContainsFunc(paths, func(m string) bool { return within(cleanPath(p), cleanPath(m)) })
	}
}

// input is a session of policy p, which goes in as written: package
// policy cleans and compares paths with the host's path/filepath, which
// on Linux takes C:\ neither for absolute nor for a directory above
// C:\x, so its Normalize would drop every carve-out here.
func input(p *sandboxdv1.Policy) planInput {
	if p == nil {
		p = policy.Default()
	}
	return planInput{
		PlanRequest: launcher.PlanRequest{Policy: p, SessionID: testSession, Env: testEnv},
		PlanHost: PlanHost{
			OfflineSID: testOfflineSID,
			OnlineSID:  testOnlineSID,
			TempDir:    testTempDir,
			NumCPU:     8,
			// What the backend finds on a host where everything below a
			// carve-out or deny path inherits, with no entries of its own.
			Uninherited: func(string) ([]Object, error) { return nil, nil },
			Kind:        func(string) (bool, uint32, error) { return true, 1, nil },
		},
	}
}

// newPlan plans in as the backend does.
func newPlan(in planInput) (*Plan, error) {
	return NewPlan(in.PlanRequest, in.PlanHost)
}

// windowsPreset is the named preset with its POSIX paths on drive C:
// package policy builds presets with the host's path/filepath, which on
// Linux does not take C:\ for absolute.
func windowsPreset(t *testing.T, name string) *sandboxdv1.Policy {
	t.Helper()
	p, err := policy.Preset(name, "/Users/dev/project")
	if err != nil {
		t.Fatal(err)
	}
	onC := func(ps []string) []string {
		var out []string
		for _, q := range ps {
			out = append(out, `C:`+strings.ReplaceAll(q, "/", `\`))
		}
		return out
	}
	fs := p.GetFilesystem()
	fs.Write, fs.ReadOnly, fs.Deny, fs.ReadRoots = onC(fs.Write), onC(fs.ReadOnly), onC(fs.Deny), onC(fs.ReadRoots)
	return p
}

type goldenCase struct {
	name string
	in   planInput
}

func goldenCases(t *testing.T) []goldenCase {
	var cases []goldenCase
	for _, name := range policy.PresetNames() {
		cases = append(cases, goldenCase{"preset-" + name, input(windowsPreset(t, name))})
	}
	withExists := func(in planInput, exists func(string) bool) planInput { in.Exists = exists; return in }
	withEnv := func(in planInput, env ...string) planInput { in.Env = env; return in }
	withCPUs := func(in planInput, n int) planInput { in.NumCPU = n; return in }
	return append(cases,
		goldenCase{"nested-carve-outs-and-deny-in-write-root", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{`C:\work\repo`, `D:\scratch`},
				ReadOnly: []string{`C:\work\repo\.git`, `C:\work\repo\vendor\lib\.git`, `C:\work\repo\.git\hooks`},
				Deny:     []string{`C:\work\repo\config\secrets.json`, `C:\work\repo\vendor\lib\.env`},
			},
		})},
		goldenCase{"deny-outside-write-roots", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write: []string{`C:\work\repo`},
				Deny:  []string{`C:\Users\dev\.ssh`, `C:\Users\dev\AppData\Roaming\gh`},
			},
		})},
		goldenCase{"missing-carve-outs-and-deny-paths", withExists(input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{`C:\work\repo`},
				ReadOnly: []string{`C:\work\repo\.git`, `C:\work\repo\a\b\.agent`},
				Deny:     []string{`C:\work\repo\a\b\.env`, `C:\Users\dev\.aws`, `C:\Users\dev\.ssh`},
			},
		}), missing(`C:\work\repo\.git`, `C:\work\repo\a`, `C:\Users\dev\.aws`))},
		goldenCase{"write-root-inside-carve-out", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{`C:\work\repo`, `C:\work\repo\.git\worktrees\w1`, `C:\work\repo\secret\out`},
				ReadOnly: []string{`C:\work\repo\.git`},
				Deny:     []string{`C:\work\repo\secret`},
			},
		})},
		// Package policy refuses this one; planned as written, the write
		// root still grants nothing.
		goldenCase{"write-root-inside-carve-out-outside-write-roots", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{`C:\work\repo\.git\worktrees\w1`},
				ReadOnly: []string{`C:\work\repo\.git`},
			},
		})},
		goldenCase{"network-host-children", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\work\repo`}},
			Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
			Children:   &sandboxdv1.Children{Allow: true},
		})},
		goldenCase{"network-none-children", input(&sandboxdv1.Policy{
			Children: &sandboxdv1.Children{Allow: true},
		})},
		goldenCase{"limits", input(&sandboxdv1.Policy{
			Limits: &sandboxdv1.Limits{MemoryBytes: 1 << 30, Pids: 128, CpuMillis: 1500, Timeout: durationpb.New(90e9)},
		})},
		goldenCase{"limits-cpu-clamped-low", withCPUs(input(&sandboxdv1.Policy{
			Limits: &sandboxdv1.Limits{CpuMillis: 1},
		}), 64)},
		goldenCase{"limits-cpu-clamped-high", withCPUs(input(&sandboxdv1.Policy{
			Limits: &sandboxdv1.Limits{CpuMillis: 64000},
		}), 4)},
		goldenCase{"path-case-and-separators", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{`C:\Work\Repo`, `c:/work/repo/`, `c:\WORK\repo\sub`},
				ReadOnly: []string{`c:\work\repo\.GIT`, `C:\Work\Repo\.git\`},
				Deny:     []string{`C:/WORK/repo/config/./Secrets`, `c:\work\repo\config\secrets`},
			},
		})},
		goldenCase{"unc-and-drive-paths", input(&sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{`\\fileserver\projects\app`, `E:\build`},
				ReadOnly: []string{`//fileserver/projects/app/.git`},
				Deny:     []string{`\\fileserver\projects\app\deploy\keys`, `E:\build\..\keys`},
			},
		})},
		goldenCase{"duplicate-env-names", withEnv(input(nil), `Path=C:\Windows`, `PATH=C:\tools`)},
		goldenCase{"env-sorted-temp-replaced", withEnv(input(nil), `b=2`, `A_B=3`, `AB=4`, `=C:=C:\work`, `tmp=C:\elsewhere`, `a=1`)},
	)
}

// TestGoldenPlans pins the rendered plan of every preset and of the
// tricky policies; go test -update rewrites them after a deliberate
// change, which the diff then shows. Every plan that is not refused must
// also keep the invariants and the policy's promises.
func TestGoldenPlans(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			pl, err := newPlan(c.in)
			got := ""
			if err != nil {
				got = "error: " + err.Error() + "\n"
			} else {
				got = pl.Render()
				checkInvariants(t, c.in, pl)
				checkSemantics(t, c.in, pl)
			}
			golden.Check(t, c.name+".plan", []byte(got))
		})
	}
}

func plan(t *testing.T, in planInput) *Plan {
	t.Helper()
	pl, err := newPlan(in)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return pl
}

// aces returns the entries on path, in the plan's order.
func aces(pl *Plan, path string) []ACE {
	var out []ACE
	for _, a := range pl.ACEs {
		if samePath(a.Path, path) {
			out = append(out, a)
		}
	}
	return out
}

func TestWorkspaceWritePreset(t *testing.T) {
	in := input(windowsPreset(t, "workspace-write"))
	pl := plan(t, in)
	const ws, git = `C:\Users\dev\project`, `C:\Users\dev\project\.git`
	want := []ACE{
		{Path: ws, SID: LogonSID, Allow: true, Mask: 0x1301BF, Inherit: true},
		{Path: ws, SID: WriteRootSID(ws), Allow: true, Mask: 0x1301BF, Inherit: true, Persistent: true},
		{Path: ws, SID: SIDOwnerRights, Allow: true, Mask: 0x20000, Inherit: true, Persistent: true},
		{Path: git, SID: LogonSID, Mask: 0xD0156, Inherit: true},
		{Path: testTempDir, SID: LogonSID, Allow: true, Mask: 0x1301BF, Inherit: true},
	}
	var got []ACE
	for _, a := range pl.ACEs {
		a.Field, a.Why = "", ""
		got = append(got, a)
	}
	slices.SortFunc(want, compareACE)
	if !slices.Equal(got, want) {
		t.Errorf("ACEs:\n got %+v\nwant %+v", got, want)
	}
	if want := []string{LogonSID, SIDRestrictedCode, WriteRootSID(ws), NetworkNoneSID}; !slices.Equal(pl.Token.Restricting, want) {
		t.Errorf("restricting SIDs %v, want %v", pl.Token.Restricting, want)
	}
	m := newACLModel(pl)
	for _, c := range []struct {
		what string
		ok   bool
		want bool
	}{
		{"write a source file", m.canWrite(ws + `\main.go`), true},
		{"delete a source file", m.canRemove(ws + `\main.go`), true},
		{"write .git/config", m.canWrite(git + `\config`), false},
		{"add a git hook", m.canWrite(git + `\hooks`), false},
		{"rename .git away", m.canRemove(git), false},
		{"delete an object", m.canRemove(git + `\objects\ab\cdef`), false},
		{"rewrite .git's ACL", m.canChangeACL(git), false},
		{"read .git/config", m.canRead(git + `\config`), true},
		{"write beside the workspace", m.canWrite(`C:\Users\dev\other\x`), false},
		{"write the temporary directory", m.canWrite(testTempDir + `\x`), true},
	} {
		if c.ok != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.ok, c.want)
		}
	}
}

func TestDenyPathAncestors(t *testing.T) {
	const root = `C:\work\repo`
	pl := plan(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write: []string{root},
		Deny:  []string{root + `\a\b\secret`, `C:\Users\dev\.ssh`},
	}}))
	for _, d := range []string{root + `\a`, root + `\a\b`} {
		got := aces(pl, d)
		if len(got) != 1 || got[0].SID != LogonSID || got[0].Allow || got[0].Mask != DELETE || got[0].Inherit || got[0].Persistent {
			t.Errorf("%s: %+v, want one per-session deny of DELETE for the logon SID on it alone", d, got)
		}
	}
	if got := aces(pl, root+`\a\b\secret`); len(got) != 1 || got[0].Mask != FILE_ALL_ACCESS || !got[0].Inherit || got[0].Persistent {
		t.Errorf("deny path: %+v", got)
	}
	if got := aces(pl, `C:\Users\dev`); len(got) != 0 {
		t.Errorf("a directory above a deny path outside every write root has entries: %+v", got)
	}
	if got := aces(pl, `C:\Users\dev\.ssh`); len(got) != 1 || got[0].SID != LogonSID || got[0].Mask != FILE_ALL_ACCESS {
		t.Errorf("deny path outside the write roots: %+v", got)
	}
	m := newACLModel(pl)
	if m.canRead(`C:\Users\dev\.ssh\id_ed25519`) || m.canRead(root+`\a\b\secret`) || m.canRemove(root+`\a`) {
		t.Errorf("a deny path is readable or the directory above one removable")
	}
	if !m.canRead(`C:\Users\dev\notes.txt`) || !m.canWrite(root+`\a\b\other`) {
		t.Errorf("what is not denied is not readable, or the write root not writable beside the deny path")
	}
}

func TestPlaceholders(t *testing.T) {
	const root = `C:\work\repo`
	in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{root},
		ReadOnly: []string{root + `\.git`, root + `\x\y\.agent`, root + `\present`},
		Deny:     []string{root + `\x\y\.env`, `C:\Users\dev\.aws`},
	}})
	in.Exists = missing(root+`\.git`, root+`\x`, `C:\Users\dev\.aws`)
	pl := plan(t, in)
	want := []string{root + `\.git`, root + `\x`, root + `\x\y`, root + `\x\y\.agent`, root + `\x\y\.env`}
	if !slices.Equal(pl.Placeholders, want) {
		t.Errorf("placeholders %q, want %q", pl.Placeholders, want)
	}
	for _, a := range pl.ACEs {
		// Only the write root's grants of everything but DELETE outlive the
		// session; carve-outs, deny paths and placeholders are the session's.
		if a.Persistent != (a.Allow && samePath(a.Path, root) && a.SID != LogonSID) {
			t.Errorf("persistent %v: %+v", a.Persistent, a)
		}
		if within(a.Path, `C:\Users\dev\.aws`) {
			t.Errorf("a missing deny path outside every write root has an entry: %+v", a)
		}
	}
}

func TestNetwork(t *testing.T) {
	none := plan(t, input(nil))
	if none.User != OfflineUser || none.UserSID != testOfflineSID || !slices.Contains(none.Token.Restricting, NetworkNoneSID) || len(none.Firewall) != 8 {
		t.Errorf("network NONE: user %s %s, restricting %v, %d filters", none.User, none.UserSID, none.Token.Restricting, len(none.Firewall))
	}
	host := plan(t, input(&sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}}))
	if host.User != OnlineUser || host.UserSID != testOnlineSID || slices.Contains(host.Token.Restricting, NetworkNoneSID) || len(host.Firewall) != 0 {
		t.Errorf("network HOST: user %s %s, restricting %v, %d filters", host.User, host.UserSID, host.Token.Restricting, len(host.Firewall))
	}
}

func TestPathCaseIsOnePath(t *testing.T) {
	pl := plan(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{`C:\Work\Repo`, `c:/work/repo`},
		ReadOnly: []string{`C:\WORK\REPO\.Git`},
	}}))
	roots := 0
	for _, a := range pl.ACEs {
		if a.Allow && a.SID == SIDOwnerRights {
			roots++
		}
	}
	if roots != 1 || len(pl.Token.Restricting) != 4 {
		t.Errorf("two spellings of one write root planned as %d roots, restricting %v", roots, pl.Token.Restricting)
	}
	if WriteRootSID(`C:\Work\Repo`) != WriteRootSID(`c:/work/repo/`) || !slices.Contains(pl.Token.Restricting, WriteRootSID(`c:\work\repo`)) {
		t.Errorf("SIDs depend on the spelling of the path")
	}
}

func TestCPURate(t *testing.T) {
	for _, c := range []struct {
		millis uint32
		n      int
		want   uint32
	}{
		{1000, 1, 10000},
		{1000, 4, 2500},
		{1500, 8, 1875},
		{1, 64, 1},
		{64000, 4, 10000},
		{^uint32(0), 1, 10000},
	} {
		if got := cpuRate(c.millis, c.n); got != c.want {
			t.Errorf("cpuRate(%d, %d) = %d, want %d", c.millis, c.n, got, c.want)
		}
	}
	in := input(&sandboxdv1.Policy{Limits: &sandboxdv1.Limits{CpuMillis: 500}})
	in.NumCPU = 0
	if _, err := newPlan(in); err == nil {
		t.Errorf("a CPU limit was planned without the processor count")
	}
}

func TestEnvironment(t *testing.T) {
	got, err := environment([]string{`b=2`, `A_B=3`, `AB=4`, `=C:=C:\work`, `Temp=C:\elsewhere`, `a=1`, `x==y`}, `C:\t`)
	if err != nil {
		t.Fatal(err)
	}
	// Names compare upper-cased, so "_" sorts after the letters.
	want := []string{`=C:=C:\work`, `a=1`, `AB=4`, `A_B=3`, `b=2`, `TEMP=C:\t`, `TMP=C:\t`, `x==y`}
	if !slices.Equal(got, want) {
		t.Errorf("environment = %q, want %q", got, want)
	}
	for _, bad := range [][]string{
		{`Path=a`, `PATH=b`},
		{`x=1`, `x=2`},
		{`TEMP=a`, `temp=b`},
		{`noequals`},
		{`=novalue`},
		{``},
		{"A=b\x00c"},
	} {
		if _, err := environment(bad, `C:\t`); err == nil {
			t.Errorf("environment(%q) accepted", bad)
		}
	}
}

func TestReport(t *testing.T) {
	pl := plan(t, input(&sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\w`}, ReadOnly: []string{`C:\w\.git`}},
		Children:   &sandboxdv1.Children{Allow: true},
		Limits:     &sandboxdv1.Limits{MemoryBytes: 1 << 20, Pids: 7, CpuMillis: 2000, Timeout: durationpb.New(1e9)},
	}))
	fields := map[string]string{}
	for _, f := range pl.Report {
		fields[f.GetField()] = f.GetMechanism()
	}
	for field, want := range map[string]string{
		"filesystem.read":      OfflineUser,
		"filesystem.write":     "FILE_DELETE_CHILD",
		"filesystem.read_only": "DELETE",
		"filesystem.deny":      "none requested",
		"network.mode":         "ALE",
		"process":              DesktopName,
		"limits.timeout":       "timer",
		"limits.memory_bytes":  "1048576 bytes",
		"limits.pids":          "7 processes",
		"limits.cpu_millis":    "2500/10000",
		"children.allow":       SessionPipeName(testSession),
	} {
		if !strings.Contains(fields[field], want) {
			t.Errorf("report %s = %q, want it to mention %q", field, fields[field], want)
		}
	}
	for _, s := range DenialSources() {
		if s.GetObserved() || s.GetHow() == "" || s.GetKind() == "" {
			t.Errorf("denial source %v", s)
		}
	}
}

func TestSessionIDAndUsers(t *testing.T) {
	in := input(nil)
	in.SessionID = `x\..\y`
	if _, err := newPlan(in); err == nil {
		t.Errorf("a session id with a backslash was accepted")
	}
	in = input(nil)
	in.OfflineSID = ""
	if _, err := newPlan(in); !isUnenforceable(err, "network.mode") {
		t.Errorf("no offline user: %v, want an Unenforceable naming network.mode", err)
	}
	in = input(nil)
	in.OfflineSID = "S-1-5-21-1)(A;;GA;;;WD"
	if _, err := newPlan(in); err == nil {
		t.Errorf("a malformed user SID was accepted")
	}
	in = input(nil)
	in.TempDir = `tmp\x`
	if _, err := newPlan(in); err == nil {
		t.Errorf("a relative temporary directory was accepted")
	}
}

func TestRenderQuotesWhatIsNotOneLine(t *testing.T) {
	in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\w`}}})
	in.Env = []string{"A=line1\nline2"}
	r := plan(t, in).Render()
	if !strings.Contains(r, `"A=line1\nline2"`) {
		t.Errorf("an environment value with a newline is not quoted:\n%s", r)
	}
}
