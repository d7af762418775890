package launcherwindows

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/tailscale/wf"
	"golang.org/x/sys/windows"
)

// Where the backend keeps its state, below Config.StateDir.
const (
	journalName = "journal"
	// tempRoot holds the sessions' private temporary directories.
	tempRoot = "tmp"
)

// The privileges the daemon uses: starting a process with a token that is
// not its own (the first two), and checking access as the sandbox by
// impersonating its token.
var neededPrivileges = []string{"SeAssignPrimaryTokenPrivilege", "SeIncreaseQuotaPrivilege", "SeImpersonatePrivilege"}

// Config configures the Windows backend.
type Config struct {
	// StateDir is the directory `sandboxd install` provisioned: the
	// sandbox users' passwords and the journal live there, and the
	// sessions' temporary directories below it.
	StateDir string
}

type backend struct {
	stateDir string
	host     *Host
	// journal is nil when the state directory could not be trusted;
	// Host.Refusal then refuses every session.
	journal *Journal
	desktop desktop

	// mu covers planning and the placeholders, so that a session ending
	// meanwhile cannot remove a placeholder a new plan counts on.
	mu           sync.Mutex
	placeholders map[string]*placeholder
	// aclMu serializes DACL edits: each reads a DACL and writes it back.
	aclMu sync.Mutex
}

// placeholder is a carve-out or deny path (or a directory above one) that
// was missing when planned: the backend makes it, so that the entries
// have an object to sit on, and removes it, if still empty, when the last
// session holding it ends.
type placeholder struct {
	path  string
	users int
	// made says the backend created it, rather than finding it created
	// after the plan was made.
	made bool
}

// New probes the host and returns the Windows backend. A host that is not
// provisioned, or a daemon without the privileges it needs, still gets a
// backend: it refuses every Start with the reason, and Capabilities says
// why.
func New(cfg Config) (launcher.Backend, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("windows backend: no state directory")
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("windows backend: state directory %s: %w", cfg.StateDir, err)
	}
	b := &backend{stateDir: dir, placeholders: map[string]*placeholder{}}
	b.host, b.journal = probeHost(dir)
	return b, nil
}

func (b *backend) Name() string { return BackendName }

// Needs says the backend needs nothing of the daemon.
func (b *backend) Needs() launcher.Needs { return needs }

// Capabilities checks the firewall filters again: they are the one
// finding an administrator may change while the daemon runs.
func (b *backend) Capabilities() *sandboxdv1.CapabilitiesReport {
	h := *b.host
	h.Probes = append([]ProbeResult(nil), h.Probes...)
	if h.OfflineSID != "" {
		for i, r := range h.Probes {
			if r.Name == ProbeFirewall {
				h.Probes[i] = verifyFirewall(FirewallFilters(h.OfflineSID))
			}
		}
	}
	return CapabilitiesOf(&h)
}

func probeHost(stateDir string) (*Host, *Journal) {
	v := windows.RtlGetVersion()
	h := &Host{Kernel: fmt.Sprintf("Windows %d.%d.%d", v.MajorVersion, v.MinorVersion, v.BuildNumber), NumCPU: runtime.NumCPU()}
	if u, err := windows.GetCurrentProcessToken().GetTokenUser(); err == nil {
		h.System = u.User.Sid.IsWellKnown(windows.WinLocalSystemSid)
	}
	h.Probes = append(h.Probes, probePrivileges())

	j, r := probeStateDir(stateDir)
	h.Probes = append(h.Probes, r)
	if j != nil {
		sweep := ProbeResult{Name: ProbeJournal, Op: "undo the sessions " + j.Path() + " still lists", OK: true}
		if err := sweepSessions(j, stateDir); err != nil {
			sweep.OK, sweep.Detail = false, err.Error()
		}
		h.Probes = append(h.Probes, sweep)
	}

	users := ProbeResult{Name: ProbeUsers, Op: "LookupAccountName(" + OfflineUser + ", " + OnlineUser + ")"}
	offline, online, err := UserSIDs()
	switch {
	case err != nil:
		users.Errno, users.Detail = errnoOf(err), err.Error()
	case offline == "" || online == "":
		users.Detail = "not both accounts exist"
	default:
		users.OK = true
	}
	h.OfflineSID, h.OnlineSID = offline, online
	h.Probes = append(h.Probes, users)
	if j != nil && users.OK {
		stale := ProbeResult{Name: ProbeStaleGrants, Op: "remove the persistent grants to the sandbox users " + j.Path() + " lists", OK: true}
		if err := removeStaleGrants(j, []string{offline, online}); err != nil {
			stale.OK, stale.Detail = false, err.Error()
		}
		h.Probes = append(h.Probes, stale)
	}
	for _, u := range sandboxUsers {
		cred, logon := probeUser(stateDir, u)
		h.Probes = append(h.Probes, cred, logon)
	}
	fw := ProbeResult{Name: ProbeFirewall, Detail: "no SID for " + OfflineUser}
	if offline != "" {
		fw = verifyFirewall(FirewallFilters(offline))
	}
	h.Probes = append(h.Probes, fw)
	return h, j
}

// errnoOf is the Windows error in err, 0 when there is none.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// probePrivileges enables the privileges the backend uses, which a
// service running as LocalSystem holds but may have disabled.
func probePrivileges() ProbeResult {
	r := ProbeResult{Name: ProbePrivileges, Op: "AdjustTokenPrivileges(" + strings.Join(neededPrivileges, ", ") + ")"}
	missing, err := enablePrivileges(neededPrivileges)
	switch {
	case err != nil:
		r.Errno, r.Detail = errnoOf(err), err.Error()
	case len(missing) > 0:
		r.Errno, r.Detail = windows.ERROR_PRIVILEGE_NOT_HELD, "not held: "+strings.Join(missing, ", ")
	default:
		r.OK = true
	}
	return r
}

// enablePrivileges enables names in the process token and returns those
// it does not hold: AdjustTokenPrivileges succeeds without enabling a
// privilege the token lacks, so the result is read back.
func enablePrivileges(names []string) (missing []string, err error) {
	var t windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ADJUST_PRIVILEGES|windows.TOKEN_QUERY, &t); err != nil {
		return nil, fmt.Errorf("OpenProcessToken: %w", err)
	}
	defer t.Close()
	luids := make([]windows.LUID, len(names))
	for i, n := range names {
		n16, err := windows.UTF16PtrFromString(n)
		if err != nil {
			return nil, err
		}
		if err := windows.LookupPrivilegeValue(nil, n16, &luids[i]); err != nil {
			return nil, fmt.Errorf("LookupPrivilegeValue(%s): %w", n, err)
		}
		tp := windows.Tokenprivileges{PrivilegeCount: 1, Privileges: [1]windows.LUIDAndAttributes{{Luid: luids[i], Attributes: windows.SE_PRIVILEGE_ENABLED}}}
		if err := windows.AdjustTokenPrivileges(t, false, &tp, 0, nil, nil); err != nil {
			return nil, fmt.Errorf("AdjustTokenPrivileges(%s): %w", n, err)
		}
	}
	held, err := enabledPrivileges(t)
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		if !held[luids[i]] {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

func enabledPrivileges(t windows.Token) (map[windows.LUID]bool, error) {
	n := uint32(256)
	for {
		// []uint64 for the alignment TOKEN_PRIVILEGES has.
		buf := make([]uint64, (n+7)/8)
		err := windows.GetTokenInformation(t, windows.TokenPrivileges, (*byte)(unsafe.Pointer(&buf[0])), uint32(len(buf)*8), &n)
		if errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("GetTokenInformation(TokenPrivileges): %w", err)
		}
		out := map[windows.LUID]bool{}
		for _, p := range (*windows.Tokenprivileges)(unsafe.Pointer(&buf[0])).AllPrivileges() {
			if p.Attributes&windows.SE_PRIVILEGE_ENABLED != 0 {
				out[p.Luid] = true
			}
		}
		return out, nil
	}
}

// probeStateDir opens the journal if the state directory, and the journal
// when it exists, are owned by SYSTEM or Administrators: a journal someone
// else could have written would have SYSTEM remove ACL entries and
// directories of their choosing.
func probeStateDir(stateDir string) (*Journal, ProbeResult) {
	path := filepath.Join(stateDir, journalName)
	r := ProbeResult{Name: ProbeStateDir, Op: "GetNamedSecurityInfo(" + stateDir + ", " + path + ", OWNER)"}
	for _, p := range []string{stateDir, path} {
		err := trustedOwner(p)
		if p == path && errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			r.Errno, r.Detail = errnoOf(err), err.Error()
			return nil, r
		}
	}
	j, err := OpenJournal(path)
	if err != nil {
		r.Op, r.Detail = "read "+path, err.Error()
		return nil, r
	}
	r.OK = true
	return j, r
}

func trustedOwner(path string) error {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		return fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return fmt.Errorf("owner of %s: %w", path, err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("owner of %s: %w", path, err)
	}
	if owner == nil || !(owner.IsWellKnown(windows.WinLocalSystemSid) || owner.IsWellKnown(windows.WinBuiltinAdministratorsSid)) {
		return fmt.Errorf("%s is owned by %v, not SYSTEM or Administrators", path, owner)
	}
	return nil
}

// probeUser decrypts user's password and logs it on once.
func probeUser(stateDir, user string) (cred, logon ProbeResult) {
	cred = ProbeResult{Name: ProbeCredentials + " " + user, Op: "CryptUnprotectData(" + credentialPath(stateDir, user) + ")"}
	logon = ProbeResult{Name: ProbeLogon + " " + user, Op: "LogonUser(" + user + ", LOGON32_LOGON_BATCH)"}
	password, err := readCredential(stateDir, user)
	if err != nil {
		cred.Errno, cred.Detail = errnoOf(err), err.Error()
		logon.Detail = "no password to log on with"
		return cred, logon
	}
	cred.OK = true
	t, err := logonUser(user, password)
	if err != nil {
		logon.Errno, logon.Detail = errnoOf(err), err.Error()
		return cred, logon
	}
	t.Close()
	logon.OK = true
	return cred, logon
}

// verifyFirewall checks that every filter is in force as planned: the
// filter with its id, from sandboxd's provider, in its sublayer and
// layer, persistent, enabled, a hard block matching exactly the planned
// users.
func verifyFirewall(filters []Filter) ProbeResult {
	r := ProbeResult{Name: ProbeFirewall, Op: "FwpmFilterEnum0 (the filters of provider " + FirewallProviderID + ")"}
	fail := func(err error) ProbeResult {
		r.Errno, r.Detail = errnoOf(err), err.Error()
		return r
	}
	provider, sublayer, err := firewallIDs()
	if err != nil {
		return fail(err)
	}
	s, err := wf.New(&wf.Options{Name: "sandboxd check", Description: "checks sandboxd's network NONE filters", Dynamic: true})
	if err != nil {
		return fail(fmt.Errorf("open the filtering engine: %w", err))
	}
	defer s.Close()
	rules, err := s.Rules()
	if err != nil {
		return fail(fmt.Errorf("list the filters: %w", err))
	}
	ours := map[wf.RuleID]*wf.Rule{}
	for _, rule := range rules {
		if rule.Provider == provider {
			ours[rule.ID] = rule
		}
	}
	for _, f := range filters {
		if why := filterMismatch(f, ours, sublayer); why != "" {
			r.Detail = why
			return r
		}
	}
	r.OK = true
	return r
}

func filterMismatch(f Filter, ours map[wf.RuleID]*wf.Rule, sublayer wf.SublayerID) string {
	id, err := windows.GUIDFromString(f.ID)
	if err != nil {
		return fmt.Sprintf("filter id %s: %v", f.ID, err)
	}
	rule := ours[wf.RuleID(id)]
	switch {
	case rule == nil:
		return fmt.Sprintf("filter %s (%s) is missing", f.ID, f.Layer)
	case rule.Layer.String() != f.Layer:
		return fmt.Sprintf("filter %s is at layer %s, not %s", f.ID, rule.Layer, f.Layer)
	case rule.Sublayer != sublayer:
		return fmt.Sprintf("filter %s is in sublayer %s, not %s", f.ID, rule.Sublayer, FirewallSublayerID)
	case f.Action != FirewallAction || rule.Action != wf.ActionBlock || !rule.HardAction:
		return fmt.Sprintf("filter %s is not a hard block", f.ID)
	case !rule.Persistent || rule.Disabled:
		return fmt.Sprintf("filter %s is not persistent and enabled", f.ID)
	case len(rule.Conditions) != 1:
		return fmt.Sprintf("filter %s has %d conditions, want the user alone", f.ID, len(rule.Conditions))
	}
	want, err := windows.SecurityDescriptorFromString(f.UserSDDL)
	if err != nil {
		return fmt.Sprintf("filter %s: user condition %q: %v", f.ID, f.UserSDDL, err)
	}
	c := rule.Conditions[0]
	got, ok := c.Value.(*windows.SECURITY_DESCRIPTOR)
	if c.Field != wf.FieldALEUserID || c.Op != wf.MatchTypeEqual || !ok || got.String() != want.String() {
		return fmt.Sprintf("filter %s matches %v, not the users %s", f.ID, c, want)
	}
	return ""
}

// sweepSessions undoes what the sessions the journal still lists left on
// the host: their daemon died before it could. Their processes died with
// it, killed when its job handles closed.
func sweepSessions(j *Journal, stateDir string) error {
	var errs []error
	for id, rec := range j.Sessions() {
		left, err := undoRecord(rec, stateDir)
		errs = append(errs, err, j.FinishSession(id, left))
	}
	return errors.Join(errs...)
}

// undoRecord removes what rec lists and returns what it could not.
func undoRecord(rec SessionRecord, stateDir string) (SessionRecord, error) {
	var left SessionRecord
	var errs []error
	for i := len(rec.ACEs) - 1; i >= 0; i-- {
		a := rec.ACEs[i]
		if err := unstampACE(a); err != nil {
			left.ACEs = append([]StampedACE{a}, left.ACEs...)
			errs = append(errs, fmt.Errorf("remove the entry for %s on %s: %w", a.SID, a.Path, err))
		}
	}
	for _, d := range rec.Placeholders {
		// Not empty: no longer the backend's to remove.
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, windows.ERROR_DIR_NOT_EMPTY) {
			left.Placeholders = append(left.Placeholders, d)
			errs = append(errs, fmt.Errorf("remove placeholder %s: %w", d, err))
		}
	}
	if rec.TempDir != "" {
		if err := removeTempDir(stateDir, rec.TempDir); err != nil {
			left.TempDir = rec.TempDir
			errs = append(errs, err)
		}
	}
	return left, errors.Join(errs...)
}

// removeTempDir removes a session's temporary directory, which must be
// one the backend makes: the journal is not trusted to name anything
// else for SYSTEM to delete.
func removeTempDir(stateDir, dir string) error {
	root := filepath.Join(stateDir, tempRoot)
	if !strings.EqualFold(filepath.Dir(dir), root) {
		return fmt.Errorf("temporary directory %s is not directly below %s: left alone", dir, root)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove temporary directory %s: %w", dir, err)
	}
	return nil
}

// exists is the planner's view of the host: a placeholder some session
// holds counts as missing, so that every session plans its entries on it
// as entries of its own.
func (b *backend) exists(p string) bool {
	if b.placeholders[pathKey(p)] != nil {
		return false
	}
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// holdPlaceholders counts the session among the users of every
// placeholder of plan; b.mu is held. The directories are made later, in
// makePlaceholders, once the journal has them.
func (b *backend) holdPlaceholders(plan *Plan) []string {
	held := make([]string, 0, len(plan.Placeholders))
	for _, p := range plan.Placeholders {
		k := pathKey(p)
		e := b.placeholders[k]
		if e == nil {
			e = &placeholder{path: p}
			b.placeholders[k] = e
		}
		e.users++
		held = append(held, k)
	}
	return held
}

// makePlaceholders creates the placeholders of held that do not exist
// yet, parents first.
func (b *backend) makePlaceholders(held []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range held {
		e := b.placeholders[k]
		if e.made {
			continue
		}
		err := os.Mkdir(e.path, 0o755)
		switch {
		case err == nil:
			e.made = true
		case errors.Is(err, fs.ErrExist):
		default:
			return fmt.Errorf("create placeholder %s: %w", e.path, err)
		}
	}
	return nil
}

func (b *backend) releasePlaceholders(held []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(held) - 1; i >= 0; i-- {
		e := b.placeholders[held[i]]
		if e.users--; e.users > 0 {
			continue
		}
		delete(b.placeholders, held[i])
		if e.made {
			// Left when not empty: what is in it is not the backend's.
			os.Remove(e.path)
		}
	}
}

// session is what one Start acquired on the host, released by release.
type session struct {
	id      string
	tempDir string
	// stamped are the per-session entries, in stamping order, each
	// added before it is stamped so that a stamp that failed halfway is
	// undone too.
	stamped []StampedACE
	held    []string
	// tempMade says the temporary directory was created.
	tempMade bool
}

// release undoes s: its entries, its placeholders, its temporary
// directory; what cannot be undone stays in the journal for the next
// sweep.
func (b *backend) release(s *session) error {
	var left SessionRecord
	var errs []error
	for i := len(s.stamped) - 1; i >= 0; i-- {
		a := s.stamped[i]
		b.aclMu.Lock()
		err := unstampACE(a)
		b.aclMu.Unlock()
		if err != nil {
			left.ACEs = append([]StampedACE{a}, left.ACEs...)
			errs = append(errs, fmt.Errorf("remove the entry for %s on %s: %w", a.SID, a.Path, err))
		}
	}
	b.releasePlaceholders(s.held)
	if s.tempMade {
		if err := removeTempDir(b.stateDir, s.tempDir); err != nil {
			left.TempDir = s.tempDir
			errs = append(errs, err)
		}
	}
	errs = append(errs, b.journal.FinishSession(s.id, left))
	return errors.Join(errs...)
}

// aclRefusal is the refusal of a session whose entry a could not be
// stamped.
func aclRefusal(a ACE, path string, err error) *launcher.Unenforceable {
	return &launcher.Unenforceable{
		Field:     a.Field,
		Mechanism: mechanismACL + " (" + a.Why + ")",
		Found:     fmt.Sprintf("the entry could not be stamped on %s: %v", path, err),
		Errno:     errnoOf(err),
		Probe:     "SetSecurityInfo(" + path + ", DACL)",
		Remedy:    "let SYSTEM change the path's DACL (READ_CONTROL and WRITE_DAC), name it without a junction, symbolic link, short name or mapped drive, and give it a DACL",
	}
}

func (b *backend) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	if why := checkPath(spec.Cwd); why != "" {
		return nil, fmt.Errorf("working directory: %s", why)
	}
	if u := b.host.Refusal(); u != nil {
		return nil, u
	}
	offline, online, err := UserSIDs()
	if err != nil {
		return nil, err
	}
	tempDir := filepath.Join(b.stateDir, tempRoot, spec.SessionID)
	walked := walkProtected(spec.Policy)
	b.mu.Lock()
	plan, err := NewPlan(spec.PlanRequest(), PlanHost{
		OfflineSID: offline, OnlineSID: online, TempDir: tempDir, NumCPU: runtime.NumCPU(),
		Exists: b.exists, Uninherited: walked, Kind: fileKind,
	})
	var held []string
	if err == nil {
		held = b.holdPlaceholders(plan)
	}
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := &session{id: spec.SessionID, tempDir: tempDir, held: held}
	if err := b.journal.BeginSession(s.id, tempDir); err != nil {
		b.releasePlaceholders(held)
		return nil, err
	}
	p, err := b.start(ctx, spec, plan, s, []string{offline, online})
	if err != nil {
		return nil, withCleanup(err, b.release(s))
	}
	return p, nil
}

// removeStaleGrants takes off the host, and then out of the journal, the
// persistent grants to the sandbox users that earlier versions stamped.
func removeStaleGrants(j *Journal, userSIDs []string) error {
	var errs []error
	for _, a := range StaleGrants(j.Persistent(), userSIDs) {
		if err := unstampACE(a); err != nil {
			errs = append(errs, fmt.Errorf("remove the grant to %s on %s: %w", a.SID, a.Path, err))
			continue
		}
		errs = append(errs, j.ForgetPersistent(a))
	}
	return errors.Join(errs...)
}

// walkProtected walks, before Start takes the backend's lock, the trees of
// the policy's carve-outs and deny paths, which NewPlan asks uninherited
// about: a large one must not hold up other sessions' starts. What it did
// not walk is walked when asked.
func walkProtected(p *sandboxdv1.Policy) func(string) ([]Object, error) {
	type result struct {
		objs []Object
		err  error
	}
	fs := p.GetFilesystem()
	var write []string
	for _, w := range fs.GetWrite() {
		if checkPath(w) == "" {
			write = append(write, cleanPath(w))
		}
	}
	done := map[string]result{}
	for i, q := range slices.Concat(fs.GetReadOnly(), fs.GetDeny()) {
		if checkPath(q) != "" {
			continue
		}
		c := cleanPath(q)
		// A carve-out outside every write root is no carve-out.
		carveOut := i < len(fs.GetReadOnly())
		if _, err := os.Lstat(c); err != nil || carveOut && outermost(c, write) == "" {
			continue
		}
		objs, err := uninherited(c)
		done[fold(c)] = result{objs, err}
	}
	return func(path string) ([]Object, error) {
		if r, ok := done[fold(path)]; ok {
			return r.objs, r.err
		}
		return uninherited(path)
	}
}

// withCleanup is err, joined with the error of undoing what preceded it
// if there is one: the caller tells refusals and exec errors by type.
func withCleanup(err, cleanup error) error {
	if cleanup == nil {
		return err
	}
	return errors.Join(err, cleanup)
}

// start does the part of Start whose every step s.release undoes;
// userSIDs are the sandbox users, whom the desktop admits.
func (b *backend) start(ctx context.Context, spec launcher.Spec, plan *Plan, s *session, userSIDs []string) (*process, error) {
	password, err := readCredential(b.stateDir, plan.User)
	if err != nil {
		return nil, credentialsRefusal("network.mode", plan.User, ProbeResult{Op: "CryptUnprotectData(" + credentialPath(b.stateDir, plan.User) + ")", Errno: errnoOf(err), Detail: err.Error()})
	}
	if len(plan.Firewall) > 0 {
		if r := verifyFirewall(plan.Firewall); !r.OK {
			return nil, firewallRefusal(r)
		}
	}
	if err := os.MkdirAll(filepath.Dir(s.tempDir), 0o700); err != nil {
		return nil, fmt.Errorf("session temporary directory: %w", err)
	}
	if err := os.Mkdir(s.tempDir, 0o700); err != nil {
		return nil, fmt.Errorf("session temporary directory: %w", err)
	}
	s.tempMade = true

	logon, err := logonUser(plan.User, password)
	if err != nil {
		return nil, logonRefusal("network.mode", plan.User, ProbeResult{Op: "LogonUser(" + plan.User + ", LOGON32_LOGON_BATCH)", Errno: errnoOf(err), Detail: err.Error()})
	}
	defer logon.Close()
	lsid, err := logonSID(logon)
	if err != nil {
		return nil, err
	}
	token, err := restrictToken(logon, plan.Token, lsid)
	if err != nil {
		return nil, err
	}
	defer token.Close()

	if err := b.stamp(plan, s, lsid); err != nil {
		return nil, err
	}
	if err := b.desktop.ensure(userSIDs); err != nil {
		return nil, err
	}
	app, execErr := resolveCommand(token, spec.Argv[0], spec.Cwd, plan.Env)
	if execErr != nil {
		return nil, execErr
	}
	if err := plan.RefuseProgram(app); err != nil {
		return nil, err
	}
	// A junction outside the write roots may lead into one.
	resolved, err := resolvedPath(app)
	if err != nil {
		return nil, fmt.Errorf("the program %s: %w", app, err)
	}
	if err := plan.RefuseProgram(resolved); err != nil {
		return nil, err
	}
	if execErr := checkCwd(token, spec.Cwd); execErr != nil {
		return nil, execErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox start abandoned: %w", err)
	}
	return b.spawn(spec, plan, s, token, app)
}

// stamp makes the plan's placeholders and stamps its entries, the logon
// SID lsid standing for LogonSID. Each is in the journal before it is on
// the host.
func (b *backend) stamp(plan *Plan, s *session, lsid string) error {
	deepestFirst := make([]string, 0, len(plan.Placeholders))
	for i := len(plan.Placeholders) - 1; i >= 0; i-- {
		deepestFirst = append(deepestFirst, plan.Placeholders[i])
	}
	if len(deepestFirst) > 0 {
		if err := b.journal.RecordPlaceholders(s.id, deepestFirst); err != nil {
			return err
		}
	}
	if err := b.makePlaceholders(s.held); err != nil {
		return err
	}
	for _, a := range plan.ACEs {
		sa := StampedACE{Path: a.Path, SID: a.SID, Allow: a.Allow, Mask: a.Mask, Inherit: a.Inherit}
		if sa.SID == LogonSID {
			sa.SID = lsid
		}
		if a.Persistent {
			if err := b.journal.RecordPersistent(sa); err != nil {
				return err
			}
		} else {
			if err := b.journal.RecordSessionACE(s.id, sa); err != nil {
				return err
			}
			s.stamped = append(s.stamped, sa)
		}
		b.aclMu.Lock()
		present, err := stampACE(sa)
		b.aclMu.Unlock()
		if present && !a.Persistent {
			// Not this session's to remove.
			s.stamped = s.stamped[:len(s.stamped)-1]
		}
		if err != nil {
			return aclRefusal(a, a.Path, err)
		}
	}
	return nil
}
