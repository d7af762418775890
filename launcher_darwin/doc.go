// Package launcherdarwin is the macOS sandbox backend. It turns a policy
// into a Seatbelt profile (SBPL text plus the parameters it reads) with pure
// functions that are tested on every OS, and applies it by starting the
// command through /usr/bin/sandbox-exec, which installs the profile on its
// own process and then executes the command in place: the profile is in
// force before the first instruction of the command runs, and every process
// the command starts inherits it.
//
// The profile denies by default. What it allows is derived from the policy
// alone: exec and fork, reads (everything, or the listed roots plus the
// system paths programs need), writes under the write roots with the
// read-only carve-outs and deny paths subtracted, the session's own socket
// when the policy allows children, the network when it is HOST, and the
// session's terminal when there is one. Every deny carries a message that
// names the session, so the violations the kernel reports to the unified
// log can be turned into denial events for the right session.
//
// macOS has no namespaces: the sandbox sees the host's paths, pids and
// network interfaces, and a session's processes are found by their process
// group and parentage rather than by a pid namespace.
package launcherdarwin
