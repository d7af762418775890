package conformance

// windowsMechanisms says, for every case of cases(), how the Windows backend
// enforces it, or why it is refused there or does not apply. It lives in a
// file without a build tag so the Linux and macOS runs check that no case
// is missing from it, and the Windows run checks that each case it runs is
// one of these.
var windowsMechanisms = map[string]string{
	"can write inside write root":                                                  "NTFS ACL: the write root grants read, write and create to the sandbox user and Modify (no FILE_DELETE_CHILD) to the root's derived SID, which only a write-restricted token of a session with that root carries; DELETE to the session's logon SID",
	"cannot write outside write roots":                                             "write-restricted token: writing must also pass for the restricting SIDs (logon SID, RESTRICTED, the write roots' derived SIDs), which no ACL outside the write roots grants; DELETE, which only the normal pass decides, is not granted there because Authenticated Users is deny-only",
	"cannot write through symlink out of write root":                               "NTFS ACL: access is checked on the object a link resolves to, whose ACL grants the session nothing",
	"cannot write via hardlink to file outside":                                    "NTFS ACL: a hard link shares the file's security descriptor, so writing through it is checked against the outside file's ACL",
	"cannot write existing read-only carve-out":                                    "NTFS ACL: inheritable deny of write, append, attributes, DELETE, FILE_DELETE_CHILD, WRITE_DAC and WRITE_OWNER for the session's logon SID, an enabled group of its token, so the normal pass denies what the restricting pass does not check",
	"cannot create not-yet-existing read-only carve-out":                           "placeholder: the daemon creates the missing carve-out as an empty directory and stamps the deny ACE on it for the session; removed afterwards if still empty",
	"cannot rename read-only carve-out":                                            "NTFS ACL: DELETE is denied on the carve-out, and the write root's grant leaves out FILE_DELETE_CHILD",
	"cannot rename ancestor of carve-out then recreate it":                         "NTFS ACL: DELETE denied, this object only, on every directory between the write root and the carve-out for the session's logon SID; the write root grants no FILE_DELETE_CHILD",
	"cannot move deny path in write root out from under its mask":                  "NTFS ACL: DELETE denied, this object only, on every directory between the write root and the deny path for the session's logon SID",
	"cannot read deny path":                                                        "NTFS ACL: inheritable deny of FILE_ALL_ACCESS for the session's logon SID, an enabled group of its token, so reads are denied too",
	"cannot write deny path in write root":                                         "NTFS ACL: the explicit deny for the logon SID precedes the write root's inherited grant; a missing deny path becomes a placeholder",
	"cannot read outside listed read roots":                                        "refused: filesystem.read — a write-restricted token cannot narrow reads, so read LISTED has no mechanism",
	"cannot connect TCP to host listener under network none":                       "WFP: persistent block filters on every ALE layer for tokens of the offline sandbox user (and the network-none SID), loopback included",
	"can connect TCP to host listener under network host":                          "network HOST runs as the online sandbox user, which no filter matches",
	"cannot reach host UDP listener under network none":                            "WFP: the resource-assignment and connect layers block binding and sending for the offline sandbox user",
	"can reach host UDP listener under network host":                               "network HOST runs as the online sandbox user, which no filter matches",
	"cannot connect to host unix socket under network none":                        "NTFS ACL: connecting to an AF_UNIX socket needs write access to its file, which the write-restricted token lacks outside the write roots",
	"cannot reach the daemon socket":                                               "pipe DACL: the main pipe denies both sandbox users and grants nothing a write-restricted token's restricting SIDs hold",
	"cannot see host processes or devices even with write to /":                    "not applicable: /proc, /dev/kmsg and /dev/mem are Linux's; process isolation is 'cannot signal host process'",
	"cannot signal host process":                                                   "process DACL: the sandbox user's token has no access to other users' processes; its own sessions' processes carry a default DACL of their logon SID alone with OWNER RIGHTS limited to READ_CONTROL",
	"cannot read host process environment or memory":                               "not applicable: /proc is Linux's; reading another process's memory needs PROCESS_VM_READ, denied by the same process DACL",
	"cannot read host process arguments or environment":                            "not applicable: kern.procargs2 is macOS's; PROCESS_VM_READ and PROCESS_QUERY_INFORMATION are denied by the process DACL",
	"cannot write kernel knobs":                                                    "not applicable: /proc/sys is Linux's; the registry's machine keys deny writes to non-administrators, and the write-restricted token fails the restricting check",
	"daemon environment does not leak":                                             "CreateProcessAsUser with an explicit environment block the daemon built, never its own",
	"stdin reaches the command":                                                    "pipe handles as the process's standard handles, or ConPTY input",
	"TIOCSTI is blocked":                                                           "not applicable: Windows consoles have no TIOCSTI; a PTY session's pseudo console is its own, made by the daemon",
	"loopback is up under network none":                                            "differs: WFP blocks loopback for the offline user too, so the probe's loopback steps are denied (Windows has no private network per process)",
	"not host root":                                                                "the sandbox runs as a provisioned non-administrator user; BUILTIN\\Administrators is deny-only and every privilege but SeChangeNotifyPrivilege is removed (DISABLE_MAX_PRIVILEGE)",
	"cannot write root-owned file in write root":                                   "NTFS ACL: a file inside the write root whose DACL is protected from inheritance keeps denying the sandbox",
	"deny path below a directory the sandbox cannot search is denied, not refused": "the daemon stamps as SYSTEM, which can reach it; the sandbox cannot",
	"command inherits no fd but its stdio":                                         "PROC_THREAD_ATTRIBUTE_HANDLE_LIST names exactly the standard handles",
	"no process survives the session":                                              "job object with KILL_ON_JOB_CLOSE and no breakaway; the job is terminated when the command exits and Wait returns once it is empty",
}
