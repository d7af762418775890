package launcherwindows

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// PlanHost is what the planner is told of the host for one session.
type PlanHost struct {
	// OfflineSID and OnlineSID are the SIDs of the provisioned sandbox
	// users (OfflineUser, OnlineUser).
	OfflineSID, OnlineSID string
	// TempDir is the host path of the session's private temporary
	// directory, which the backend creates empty before stamping.
	TempDir string
	// NumCPU is the host's logical processor count, for the CPU rate.
	NumCPU int
	// Exists says whether a path exists now; nil means every path does.
	// Carve-outs and deny paths that do not exist become placeholders.
	Exists func(path string) bool
	// Uninherited returns the objects at or below path whose own DACL
	// Windows reads before anything they inherit from above: those with a
	// DACL protected from inheritance, and those with explicit allow
	// entries. The entries stamped on a carve-out or deny path are
	// inherited below it, so such an object may keep what they take away,
	// and the sandbox user, which every session shares, may have made it
	// so in an earlier session (a DACL given at creation needs no
	// WRITE_DAC), or the host may have given it a DACL of its own. Nil
	// means it cannot be known, and an existing carve-out or deny path is
	// refused.
	Uninherited func(path string) ([]Object, error)
	// Kind says whether path, which exists, is a directory and how many
	// names (hard links) it has. Every name of a file shares its DACL, so
	// an entry stamped through one holds for all, wherever they lie: a
	// write root that is a link to a system file would have the service,
	// which may change any DACL, make that file writable. Nil means it
	// cannot be known, and every existing path the plan stamps is refused.
	Kind func(path string) (dir bool, links uint32, err error)
}

// Object is an object whose own DACL decides access ahead of the entries
// it inherits (PlanHost.Uninherited).
type Object struct {
	Path string
	// Protected: its DACL does not inherit, so nothing stamped above it
	// reaches it.
	Protected bool
	// Owner holds READ_CONTROL and WRITE_DAC on it unless an OWNER RIGHTS
	// entry in its DACL says otherwise.
	Owner Trustee
	// Allows are the allow entries read before any inherited from above:
	// all of a protected DACL's, otherwise the explicit ones. Inherit-only
	// entries count: what they give the objects below comes before the
	// entries those inherit from further up.
	Allows []Grant
}

// Trustee is a SID an entry or an owner names.
type Trustee struct {
	// SID is "" for an entry of a kind whose trustee is not read.
	SID string
	// User: the SID is a user account's (SidTypeUser). A token holds one
	// user SID, its own, so another user's grants nothing to the sandbox.
	User bool
}

// Grant is an allow entry.
type Grant struct {
	Trustee
	Mask uint32
}

// planInput is a request with what its host adds. Of the request, the
// planner reads the policy, the session id (which names the session's
// pipe, temporary directory and SIDs), the environment the daemon built,
// whether the session is a child (whose processes count against its
// parent's job limits) and whether it asks for a PTY (a pseudo console).
type planInput struct {
	launcher.PlanRequest
	PlanHost
}

// Plan is a policy made concrete for a restricted token, NTFS ACLs, the
// firewall and a job object.
type Plan struct {
	// User is the account the session logs on as, UserSID its SID.
	User, UserSID string
	Token         Token
	// Placeholders are carve-outs and deny paths that do not exist: the
	// backend creates each as an empty directory before stamping, so an
	// ACE has an object to sit on and the sandbox cannot create it.
	// Missing directories above one, inside its write root, are listed
	// too, each before the directories below it: created in order and
	// removed in reverse, none is left behind.
	Placeholders []string
	// ACEs are stamped in order before the process starts.
	ACEs []ACE
	// Firewall is what must already be in force for this session's user;
	// the backend verifies it and refuses the session when it is not.
	Firewall []Filter
	Job      Job
	// Desktop is the window station and desktop the process runs on.
	Desktop string
	// Env is the process's environment block, sorted case-insensitively.
	Env []string
	// Report says per field what enforces it.
	Report []*sandboxdv1.FieldEnforcement

	// writable are the paths another session of the user may change:
	// the write roots and the temporary directory.
	writable []string
	// sids says what each SID of the plan stands for, for Render.
	sids map[string]string
}

// LogonSID stands for the session's logon SID, which exists only once the
// backend has logged the user on; the backend substitutes it.
const LogonSID = "LOGON"

// Token is how the logon token is restricted.
type Token struct {
	DisableMaxPrivilege bool
	// WriteRestricted: restricting SIDs are checked for write access only.
	WriteRestricted bool
	// DenyOnly SIDs are disabled in the token (deny-only).
	DenyOnly []string
	// Restricting SIDs, LogonSID among them.
	Restricting []string
	// IntegrityLevel is a mandatory label SID (S-1-16-...).
	IntegrityLevel string
	// DefaultDACL is the SDDL DACL of the objects the sandbox creates,
	// LogonSID standing for the logon SID.
	DefaultDACL string
}

// ACE is one access control entry stamped on a path.
type ACE struct {
	Path string
	// SID is a SID string or LogonSID.
	SID   string
	Allow bool
	// Mask is the access mask (FILE_* and standard rights).
	Mask uint32
	// Inherit makes the entry apply to everything below Path (object and
	// container inherit); otherwise it applies to Path alone.
	Inherit bool
	// Persistent entries are keyed on SIDs only sandboxd tokens carry and
	// stay after the session (recorded in the journal, removed by
	// uninstall); the others are removed when the session ends.
	Persistent bool
	// Field is the policy field the entry enforces.
	Field string
	// Why says in a few words what the entry is for.
	Why string
}

// Filter is one persistent Windows Filtering Platform filter.
type Filter struct {
	// Layer is the WFP layer's name, e.g. "ALE_AUTH_CONNECT_V4".
	Layer string
	// Action is "block".
	Action string
	// UserSDDL is the security descriptor the ALE user id condition
	// matches tokens against.
	UserSDDL string
	// ID is the filter's fixed GUID, "{...}": installing again replaces
	// the filter rather than adding a second one, and verifying looks it
	// up.
	ID string
	// Name is what tools listing the filters show.
	Name string
}

// Job is the job object's settings.
type Job struct {
	KillOnClose, DieOnUnhandledException bool
	// ActiveProcessLimit is 0 for none.
	ActiveProcessLimit uint32
	// JobMemoryLimit is in bytes, 0 for none.
	JobMemoryLimit uint64
	// CPURate is a hard cap in hundredths of a percent of the machine,
	// 0 for none.
	CPURate uint32
	// UIRestrictions are the JOB_OBJECT_UILIMIT_* flags.
	UIRestrictions uint32
}
