package launcherdarwin

import (
	"fmt"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// BackendName is what reports and capabilities call this backend.
const BackendName = "darwin"

// MechanismSet is this backend's only way to enforce a policy.
const MechanismSet = "seatbelt"

func report(in input, pl *Plan) []*sandboxdv1.FieldEnforcement {
	f := func(field, mech string) *sandboxdv1.FieldEnforcement {
		return &sandboxdv1.FieldEnforcement{Field: field, Mechanism: mech}
	}
	const sb = "seatbelt profile via sandbox-exec: "
	read := sb + "file-read* and process-exec of every path but the deny paths"
	if !pl.readAll {
		read = sb + "file-read* and process-exec only below the read roots, the write roots and the system paths (" + strings.Join(SystemReadRoots, ", ") + "); lookup, not listing, of the directories above them"
	}
	out := []*sandboxdv1.FieldEnforcement{
		f("filesystem.read", read),
		f("filesystem.write", sb+"file-write* only below the write roots, matched on resolved paths"),
	}
	if len(in.Policy.GetFilesystem().GetReadOnly()) > 0 {
		out = append(out, f("filesystem.read_only", sb+"file-write* denied below each carve-out, as spelled and as resolved, whether it exists or not; unlink and rename of it and of every directory above it denied"))
	} else {
		out = append(out, f("filesystem.read_only", "none requested"))
	}
	if len(in.Policy.GetFilesystem().GetDeny()) > 0 {
		out = append(out, f("filesystem.deny", sb+"file-read*, file-write* and process-exec denied below each path, as spelled and as resolved; unlink and rename of it and of every directory above it denied"))
	} else {
		out = append(out, f("filesystem.deny", "none requested"))
	}
	if in.Policy.GetNetwork().GetMode() == sandboxdv1.Network_HOST {
		out = append(out, f("network.mode", sb+"network* allowed; connecting to the daemon's sockets denied"))
	} else {
		out = append(out, f("network.mode", sb+"network* denied: no socket reaches anything, loopback included (macOS has no private network); socketpair allowed"))
	}
	out = append(out, f("process", fmt.Sprintf(sb+"deny by default; fork and exec, but no exec of a set-user-ID or set-group-ID file and no setting of those bits (file-mode, file-write-setugid); signals and process information only within the sandbox; listed sysctls and system services; new session (setsid); host uid %d, not root; at its end the daemon kills the processes it found in the session's process groups and among their descendants, looking every 100 ms: a process that leaves the groups and loses its parent between two looks is not found and can outlive the session, still under the profile", in.UID)))
	if n := in.Policy.GetLimits().GetOutputBytes(); n != 0 {
		out = append(out, f("limits.output_bytes", fmt.Sprintf("daemon output accounting: output beyond %d bytes is dropped after a marker; the command runs on", n)))
	}
	if in.SessionSocket != "" {
		out = append(out, f("children.allow", sb+"the session socket at its host path "+in.SessionSocket+" is the one unix socket the sandbox may connect to; the daemon's other sockets denied"))
	}
	return out
}

// DenialSources says how this backend observes refusals: every one the
// profile makes is reported by the kernel to the unified log with the
// session's tag, where the daemon reads it.
func DenialSources() []*sandboxdv1.DenialSource {
	const how = "the unified log: the kernel reports each operation the profile denies, tagged with the session (log stream, sender Sandbox); reported after the fact, and repeated identical refusals may be reported once"
	return []*sandboxdv1.DenialSource{
		{Kind: "filesystem.write", Observed: true, How: how + "; named filesystem.read_only or filesystem.deny within those paths"},
		{Kind: "filesystem.read", Observed: true, How: how + "; named filesystem.deny within deny paths"},
		{Kind: "network.mode", Observed: true, How: how},
		{Kind: "process", Observed: true, How: how + "; signals, process information, sysctls and services outside the sandbox"},
	}
}
