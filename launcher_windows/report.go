package launcherwindows

import (
	"fmt"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// BackendName is what reports and capabilities call this backend.
const BackendName = "windows"

// MechanismSet is this backend's only way to enforce a policy.
const MechanismSet = "restricted-token"

// The local users `sandboxd install` provisions. Every session logs one of
// them on anew, so each has a logon SID of its own.
const (
	// OfflineUser runs every network NONE session; the firewall filters
	// match it.
	OfflineUser = "sandboxd-offline"
	// OnlineUser runs every network HOST session.
	OnlineUser = "sandboxd-online"
)

func report(in planInput, pl *Plan, write, readOnly, deny []string) []*sandboxdv1.FieldEnforcement {
	f := func(field, mech string) *sandboxdv1.FieldEnforcement {
		return &sandboxdv1.FieldEnforcement{Field: field, Mechanism: mech}
	}
	const wr = "write-restricted token: a write needs both the user and one of the token's restricting SIDs granted"
	out := []*sandboxdv1.FieldEnforcement{
		f("filesystem.read", "restricted token of the local user "+pl.User+": every path the host's ACLs let "+pl.User+" read (a write-restricted token does not narrow reads; what only the calling user may read stays unreadable), but the deny paths"),
	}
	if len(write) > 0 {
		out = append(out, f("filesystem.write", wr+"; entries on each write root, inherited below it: Modify for the session's logon SID, for the session only (the user "+pl.User+" is every session's, so nothing is granted to it); persistent Modify (without FILE_DELETE_CHILD) for the write root's own SID, which grants nothing without the first; persistent OWNER RIGHTS READ_CONTROL, so owning a file (the sandbox user owns what earlier sessions made) gives no implicit WRITE_DAC; Modify for the session's logon SID on its private temporary directory (TEMP, TMP)"))
	} else {
		out = append(out, f("filesystem.write", wr+"; no write root: only the session's private temporary directory (TEMP, TMP), through the session's logon SID, and devices such as NUL"))
	}
	if len(readOnly) > 0 {
		out = append(out, f("filesystem.read_only", mechanismACL+": deny of every write right, DELETE, WRITE_DAC and WRITE_OWNER for the session's logon SID on each carve-out, inherited below it, and deny of DELETE on every directory between its write root and it, for the session only; a missing carve-out is created empty for the session; one below which an object's own DACL (protected from inheritance, or with explicit allow entries, which Windows reads before inherited ones) may give the session a write right is refused"))
	} else {
		out = append(out, f("filesystem.read_only", "none requested"))
	}
	if len(deny) > 0 {
		out = append(out, f("filesystem.deny", mechanismACL+" for the session only: deny of all access for the session's logon SID on each deny path, inherited below it, and deny of DELETE on every directory between its write root and it; a missing one inside a write root is created empty for the session, one outside every write root cannot be created by the sandbox; one below which an object's own DACL (protected from inheritance, or with explicit allow entries, which Windows reads before inherited ones) may give the session any right is refused"))
	} else {
		out = append(out, f("filesystem.deny", "none requested"))
	}
	if in.Policy.GetNetwork().GetMode() == sandboxdv1.Network_HOST {
		out = append(out, f("network.mode", "runs as "+OnlineUser+", which no sandboxd firewall filter matches: the host's network"))
	} else {
		out = append(out, f("network.mode", "runs as "+OfflineUser+" with the network NONE restricting SID; persistent Windows Filtering Platform filters block both at every ALE layer (connect, accept, listen, bind; IPv4 and IPv6; loopback included) for connections the sandbox's own processes make; named pipes are not IP. Not covered: what a system service does for the sandbox under its own account, which the filters do not match: name lookups through the DNS Client service, UNC paths through the SMB redirector (the System process) and the WebClient service, transfers handed to BITS, any of which may reach the network"))
	}
	out = append(out, f("process", "restricted token from a logon of "+pl.User+" for the session alone: every privilege but SeChangeNotifyPrivilege removed, Administrators and Authenticated Users deny-only, Medium integrity, a default DACL no other session's token is granted by; job object: every process in it killed when the session ends, no breakaway, every UI restriction; not covered: a process a system service starts for the sandbox user, such as a Task Scheduler task the sandbox registers for itself with an S4U logon (the user holds the batch logon right the backend logs it on with), which would run outside the job with an unrestricted token and a logon SID of its own, which the session's entries do not name; window station and desktop "+DesktopName+" of the daemon's own"))
	l := in.Policy.GetLimits()
	if l.GetTimeout() != nil {
		out = append(out, f("limits.timeout", "daemon wall-clock timer, termination of the job object"))
	}
	if n := l.GetOutputBytes(); n != 0 {
		out = append(out, f("limits.output_bytes", fmt.Sprintf("daemon output accounting: output beyond %d bytes is dropped after a marker; the command runs on", n)))
	}
	if l.GetMemoryBytes() != 0 {
		out = append(out, f("limits.memory_bytes", fmt.Sprintf("job object JobMemoryLimit of %d bytes, committed (not resident) by all its processes together: a commit beyond it fails, and on the job's notification of it the daemon ends the session, killed, with limits.memory_bytes as the reason", pl.Job.JobMemoryLimit)))
	}
	if l.GetPids() != 0 {
		out = append(out, f("limits.pids", fmt.Sprintf("job object ActiveProcessLimit of %d processes: counts processes, not threads (Linux's pids limit counts every thread); starting a process beyond it fails", pl.Job.ActiveProcessLimit)))
	}
	if l.GetCpuMillis() != 0 {
		out = append(out, f("limits.cpu_millis", fmt.Sprintf("job object CPU rate hard cap of %d/10000 of the machine (%d millis over %d logical processors)", pl.Job.CPURate, l.GetCpuMillis(), in.NumCPU)))
	}
	if in.Policy.GetChildren().GetAllow() {
		out = append(out, f("children.allow", "session pipe "+SessionPipeName(in.SessionID)+", granted only to the session's own restricting SID; the main pipe denies the sandbox users"))
	}
	return out
}

// DenialSources says how this backend observes refusals: it does not yet.
// Windows refuses by failing the call, and records it only where auditing
// is configured, which sandboxd neither configures nor reads.
func DenialSources() []*sandboxdv1.DenialSource {
	const acl = "not observed: an access check that fails returns ERROR_ACCESS_DENIED to the process and is recorded only by object access auditing with SACLs on the paths, which sandboxd does not set up"
	return []*sandboxdv1.DenialSource{
		{Kind: "filesystem.write", How: acl},
		{Kind: "filesystem.read", How: acl},
		{Kind: "network.mode", How: "not observed: the Windows Filtering Platform logs a blocked connection only when auditing of the Filtering Platform Connection subcategory is on, and sandboxd neither turns it on nor reads the security log"},
		{Kind: "process", How: "not observed: job object limits and UI restrictions fail the call in the process, and the daemon does not read the job's completion port notifications"},
	}
}
