package conformance

import (
	"strings"
	"testing"
)

// caseOutcomes is the shared case list: every conformance case, by name,
// with what it comes to on each OS. Each outcome starts with its kind:
//
//   - "enforced": the case runs there and must pass;
//   - "differs: ...": it runs with steps changed where the OS enforces
//     the policy with a visible difference, which the text names;
//   - "refused: FIELD ...": the backend refuses the case's policy for
//     FIELD, and the case asserts that refusal;
//   - "not applicable: ...": it tries something the OS does not have.
//
// Linux and macOS run cases(), Windows windowsCases(); each run checks
// its cases against this list (TestCasesFollowTheSharedList, and the
// Windows TestConformance), so that no OS marks a case enforced without
// running it. It lives in a file without a build tag so that every OS
// compiles it.
var caseOutcomes = map[string]outcomes{
	"can write inside write root": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: the write root grants Modify to the session's logon SID for the session alone, and Modify (no FILE_DELETE_CHILD) to the root's derived SID, which only a write-restricted token of a session with that root carries; OWNER RIGHTS gets READ_CONTROL only, so owning a file gives no implicit WRITE_DAC",
	},
	"cannot write outside write roots": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: write-restricted token: writing must also pass for the restricting SIDs (logon SID, RESTRICTED, the write roots' derived SIDs), which no ACL outside the write roots grants; DELETE, which only the normal pass decides, is not granted there because Authenticated Users is deny-only",
	},
	"cannot write through symlink out of write root": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: access is checked on the object a link resolves to, whose ACL grants the session nothing",
	},
	"cannot write via hardlink to file outside": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: a hard link shares the file's security descriptor, so writing through it is checked against the outside file's ACL",
	},
	"cannot write existing read-only carve-out": {
		linux:   "enforced: the landlock set refuses filesystem.read_only",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: inheritable deny of write, append, attributes, DELETE, FILE_DELETE_CHILD, WRITE_DAC and WRITE_OWNER for the session's logon SID, an enabled group of its token, so the normal pass denies what the restricting pass does not check",
	},
	"cannot create not-yet-existing read-only carve-out": {
		linux:   "enforced: the landlock set refuses filesystem.read_only",
		darwin:  "enforced",
		windows: "enforced: placeholder: the daemon creates the missing carve-out as an empty directory and stamps the deny ACE on it for the session; removed afterwards if still empty",
	},
	"cannot rename read-only carve-out": {
		linux:   "enforced: the landlock set refuses filesystem.read_only",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: DELETE is denied on the carve-out, and the write root's grant leaves out FILE_DELETE_CHILD",
	},
	"cannot rename ancestor of carve-out then recreate it": {
		linux:   "enforced: the landlock set refuses filesystem.read_only",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: DELETE denied, this object only, on every directory between the write root and the carve-out for the session's logon SID; the write root grants no FILE_DELETE_CHILD",
	},
	"cannot move deny path in write root out from under its mask": {
		linux:   "enforced: the landlock set refuses filesystem.deny",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: DELETE denied, this object only, on every directory between the write root and the deny path for the session's logon SID",
	},
	"cannot read deny path": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: inheritable deny of FILE_ALL_ACCESS for the session's logon SID, an enabled group of its token, so reads are denied too",
	},
	"cannot write deny path in write root": {
		linux:   "enforced: the landlock set refuses filesystem.deny",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: the explicit deny for the logon SID precedes the write root's inherited grant; a missing deny path becomes a placeholder",
	},
	"cannot read outside listed read roots": {
		linux:   "refused: filesystem.read",
		darwin:  "enforced",
		windows: "refused: filesystem.read — a write-restricted token cannot narrow reads, so read LISTED has no mechanism",
	},
	"cannot connect TCP to host listener under network none": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: WFP: persistent block filters on every ALE layer for tokens of the offline sandbox user (and the network-none SID), loopback included",
	},
	"can connect TCP to host listener under network host": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: network HOST runs as the online sandbox user, which no filter matches",
	},
	"cannot reach host UDP listener under network none": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: WFP: the resource-assignment and connect layers block binding and sending for the offline sandbox user",
	},
	"can reach host UDP listener under network host": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: network HOST runs as the online sandbox user, which no filter matches",
	},
	"cannot connect to host unix socket under network none": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: connecting to an AF_UNIX socket needs write access to its file, which the write-restricted token lacks outside the write roots",
	},
	"can connect to its own unix sockets under network none": {
		linux:   "enforced",
		darwin:  "not applicable: a session's own unix sockets under the macOS backend are not measured yet (issue 26)",
		windows: "not applicable: the case is Linux's (its own unix sockets under NONE); Windows AF_UNIX sockets are files whose ACLs decide",
	},
	"cannot reach the daemon socket": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: pipe DACL: the main pipe denies both sandbox users and grants nothing a write-restricted token's restricting SIDs hold",
	},
	"cannot see host processes or devices even with write to /": {
		linux:   "enforced: the landlock set refuses filesystem.write",
		darwin:  "not applicable: /proc and /dev/kmsg, /dev/mem are Linux's; on macOS process visibility is covered by 'cannot read host process arguments or environment'",
		windows: "not applicable: /proc, /dev/kmsg and /dev/mem are Linux's; process isolation is 'cannot signal host process'",
	},
	"masks and deny paths hold with write to /": {
		linux:   "enforced: the landlock set refuses filesystem.deny",
		darwin:  "not applicable: the /proc masks and knobs are Linux's; deny paths under a write root are covered on macOS by the deny cases",
		windows: "not applicable: the /proc masks and knobs are Linux's; deny paths under a write root are covered by the deny cases",
	},
	"cannot read or change the daemon's state under a write root": {
		linux:   "enforced: the landlock set refuses filesystem.write",
		darwin:  "not applicable: not run on macOS yet; the seatbelt profile denies the daemon's state (launcher_darwin's write-home-daemon-state golden)",
		windows: "not applicable: the case is Linux's; the Windows backend is not measured for it yet",
	},
	"cannot move the daemon's state away or make its journal hold a directory": {
		linux:   "enforced: the landlock set refuses filesystem.deny",
		darwin:  "not applicable: not run on macOS yet; the seatbelt profile denies the daemon's state (launcher_darwin's write-home-daemon-state golden)",
		windows: "not applicable: the case is Linux's; the Windows backend is not measured for it yet",
	},
	"cannot signal host process": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: process DACL: the sandbox user's token has no access to other users' processes; its own sessions' processes carry a default DACL of their logon SID alone with OWNER RIGHTS limited to READ_CONTROL",
	},
	"cannot read host process environment or memory": {
		linux:   "enforced",
		darwin:  "not applicable: it reads /proc, which is Linux's; on macOS 'cannot read host process arguments or environment' reads kern.procargs2",
		windows: "not applicable: /proc is Linux's; reading another process's memory needs PROCESS_VM_READ, denied by the same process DACL",
	},
	"cannot read host process arguments or environment": {
		linux:   "not applicable: kern.procargs2 is macOS's; on Linux 'cannot read host process environment or memory' reads /proc",
		darwin:  "enforced",
		windows: "not applicable: kern.procargs2 is macOS's; PROCESS_VM_READ and PROCESS_QUERY_INFORMATION are denied by the process DACL",
	},
	"cannot write kernel knobs": {
		linux:   "enforced",
		darwin:  "not applicable: /proc/sys is Linux's; macOS has sysctl, whose writes need root and which the profile does not allow",
		windows: "not applicable: /proc/sys is Linux's; the registry's machine keys deny writes to non-administrators, and the write-restricted token fails the restricting check",
	},
	"daemon environment does not leak": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: CreateProcessAsUser with an explicit environment block the daemon built, never its own",
	},
	"stdin reaches the command": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: pipe handles as the process's standard handles, or ConPTY input",
	},
	"TIOCSTI is blocked": {
		linux:   "enforced",
		darwin:  "not applicable: Seatbelt cannot filter ioctl requests; on macOS a PTY session's terminal is its own, allocated by the daemon, so injected input reaches only the session itself",
		windows: "not applicable: Windows consoles have no TIOCSTI; PTY sessions are refused (field process): the pseudo console's host would run as LocalSystem outside the job",
	},
	"loopback is up under network none": {
		linux:   "enforced",
		darwin:  "differs: no private loopback; the sandbox under NONE has no network at all",
		windows: "differs: WFP blocks loopback for the offline user too, so the probe's loopback steps are denied (Windows has no private network per process)",
	},
	"not host root": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: the sandbox runs as a provisioned non-administrator user; BUILTIN\\Administrators is deny-only and every privilege but SeChangeNotifyPrivilege is removed (DISABLE_MAX_PRIVILEGE)",
	},
	"cannot write root-owned file in write root": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: NTFS ACL: a file inside the write root whose DACL is protected from inheritance keeps denying the sandbox",
	},
	"deny path below a directory the sandbox cannot search is denied, not refused": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: the daemon stamps as SYSTEM, which can reach it; the sandbox cannot",
	},
	"cannot start with its cwd in a deny path": {
		linux:   "enforced: the daemon refuses the session naming the deny path (filesystem.deny[N], N in the daemon's sorted order) whatever the cwd's spelling, and the init fails a cwd a symlink leads there as a command that cannot run (126)",
		darwin:  "not applicable: not run on macOS yet; the seatbelt profile's deny rules are not measured for a cwd",
		windows: "not applicable: the case is Linux's; the Windows backend is not measured for a cwd in a deny path yet",
	},
	"exit status does not tell whether a deny path holds the command": {
		linux:   "enforced: the landlock set's init ends an argv0 that resolves into a deny path as a missing file (127) whether it is there or not; the namespaces set's mask cannot be searched, so both fail as a file that cannot be executed (126)",
		darwin:  "not applicable: not run on macOS yet; the seatbelt profile's deny rules are not measured for argv0",
		windows: "not applicable: 126 and 127 are POSIX's exit codes for a command that cannot be executed or found",
	},
	"cannot reach the daemon's session keyring": {
		linux:   "enforced: the seccomp filter denies the key calls; a session without one (the namespaces set under network HOST on a host without seccomp) joins a session keyring of its own at its start",
		darwin:  "not applicable: session keyrings are Linux's",
		windows: "not applicable: session keyrings are Linux's; a Windows session's credentials are its own logon session's",
	},
	"command inherits no fd but its stdio": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: not run yet: the probe cannot list a Windows process's inherited handles; the backend passes PROC_THREAD_ATTRIBUTE_HANDLE_LIST with exactly the standard handles",
	},
	"no process survives the session": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: job object with KILL_ON_JOB_CLOSE and no breakaway; the job is terminated when the command exits and Wait returns once it is empty",
	},
	"can reach allowed host through the proxy by HTTP, CONNECT and SOCKS": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — the Windows backend has no daemon-run allowlist proxy (and no private network to confine a sandbox to it)",
	},
	"cannot reach host or port not in network.allow through the proxy": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"an allowed port of the host's loopback is reached as default clients reach it": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"an allowed localhost port of the host is reached as default clients reach it": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"wildcard host admits names below it, never its apex": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"cannot reach loopback through an allowed name that resolves there": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"can reach allowed IPv6 literal, not 127.0.0.1 on its port": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"cannot leave the sandbox around the proxy": {
		linux:   "enforced: the landlock set refuses network.mode",
		darwin:  "refused: network.allow",
		windows: "refused: network.allow — no daemon-run allowlist proxy on Windows",
	},
	"fork bomb is contained by limits.pids": {
		linux:   "enforced",
		darwin:  "refused: limits.pids",
		windows: "enforced: job object JOB_OBJECT_LIMIT_ACTIVE_PROCESS; starting a process beyond it fails (it counts processes, where Linux counts threads too)",
	},
	"memory hog is killed by limits.memory_bytes, a program under it runs": {
		linux:   "enforced",
		darwin:  "refused: limits.memory_bytes",
		windows: "enforced: job object JOB_OBJECT_LIMIT_JOB_MEMORY: a commit beyond it fails, and the job's notification of it makes the daemon kill the session with limits.memory_bytes as the reason",
	},
	"cpu burn is throttled to limits.cpu_millis": {
		linux:   "enforced",
		darwin:  "refused: limits.cpu_millis",
		windows: "enforced: job object CPU rate control with a hard cap",
	},
	"timeout kills the whole session tree, escaped processes too": {
		linux:   "enforced",
		darwin:  "refused: limits.timeout",
		windows: "enforced: the daemon's wall-clock timer ends the session, whose job object (KILL_ON_JOB_CLOSE, no breakaway) is terminated with every process in it",
	},
	"output beyond limits.output_bytes is dropped with one marker, the command runs on": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: daemon-side: the daemon counts what it reads of the session's output (its pipes, or the pseudo console) and drops what is past the cap, the same on every OS",
	},
	"cannot change mode, owner or times outside write roots": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: chmod, chown and utimes are Unix calls; their Windows counterparts need FILE_WRITE_ATTRIBUTES, WRITE_DAC or WRITE_OWNER, which no ACL outside the write roots grants the session",
	},
	"cannot change metadata of read-only carve-out": {
		linux:   "enforced: the landlock set refuses filesystem.read_only",
		darwin:  "enforced",
		windows: "not applicable: chmod, chown and utimes are Unix calls; the carve-out's inheritable deny entry covers FILE_WRITE_ATTRIBUTES, WRITE_DAC and WRITE_OWNER",
	},
	"deny path is neither changed nor seen": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: stat, access and readlink are Unix calls; what a directory listing shows of a deny path there is not measured yet",
	},
	"cannot change xattrs or inode flags outside write roots": {
		linux:   "enforced",
		darwin:  "not applicable: extended attributes, inode-flag ioctls and Linux's newest metadata calls",
		windows: "not applicable: extended attributes and inode-flag ioctls are Linux's",
	},
	"deny path's xattrs and O_PATH fds are not seen": {
		linux:   "enforced",
		darwin:  "not applicable: extended attributes, statx and O_PATH",
		windows: "not applicable: extended attributes, statx and O_PATH are Linux's",
	},
}

// outcomes is one case's outcome per OS.
type outcomes struct {
	linux, darwin, windows string
}

// kind is the kind an outcome starts with: "enforced", "differs",
// "refused" or "not applicable"; "" for none.
func kind(o string) string {
	if o == "enforced" {
		return o
	}
	for _, k := range []string{"enforced", "differs", "refused", "not applicable"} {
		if strings.HasPrefix(o, k+": ") {
			return k
		}
	}
	return ""
}

// refusedField is the field a "refused: FIELD ..." outcome names.
func refusedField(o string) string {
	f, _, _ := strings.Cut(strings.TrimPrefix(o, "refused: "), " ")
	return f
}

func TestCaseOutcomesAreWellFormed(t *testing.T) {
	for name, o := range caseOutcomes {
		for os, out := range map[string]string{"linux": o.linux, "darwin": o.darwin, "windows": o.windows} {
			switch kind(out) {
			case "":
				t.Errorf("%s on %s: %q starts with no kind", name, os, out)
			case "refused":
				if !strings.Contains(refusedField(out), ".") && refusedField(out) != "process" {
					t.Errorf("%s on %s: %q names no policy field", name, os, out)
				}
			}
		}
	}
}
