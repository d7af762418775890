// Package launcherwindows is the Windows sandbox backend. NewPlan turns a
// policy into a Plan with pure functions that are tested on every OS; the
// files ending in _windows.go apply it.
//
// A sandboxed process runs as one of two local users sandboxd provisions,
// logged on anew for each session so that the session has a logon SID of
// its own, under a restricted token: privileges dropped, Administrators
// deny-only, and write-restricted, so that every write must be granted
// both to the user and to one of the token's restricting SIDs. Those are
// the logon SID, SIDs derived from the policy's paths (one per write root,
// one per read-only carve-out) and, under network NONE, a SID the
// persistent firewall filters block. Reads are whatever the host's ACLs
// let the sandbox user read, less the deny paths.
//
// The plan's ACEs grant each write root to its SID, deny each carve-out to
// its SID, and deny each deny path to the logon SID. Entries keyed on
// derived SIDs stay for later sessions, which carry the same SIDs for the
// same paths; entries keyed on the logon SID go with the session. Paths
// are Windows paths on every OS: compared regardless of case and with
// both slashes as separators, as NTFS and Win32 do.
//
// Every process of a session lives in one job object, which carries the
// policy's memory, process and CPU limits and every UI restriction, on a
// window station and desktop of the daemon's own.
package launcherwindows
