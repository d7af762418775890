package daemon

// BackendOptions configures the OS backend DefaultBackend returns.
type BackendOptions struct {
	// SandboxUID and SandboxGID are what root callers' sandboxes run as; the
	// backend probes the host for that identity.
	SandboxUID, SandboxGID uint32
	// MechanismSet forces one of the backend's mechanism sets (on Linux
	// "namespaces" or "landlock", on macOS only "seatbelt", on Windows only
	// the one it has); empty lets the backend choose per policy. A forced
	// set that cannot enforce a policy refuses it.
	MechanismSet string
	// StateDir is where the backend keeps what outlives a session: on
	// Windows the sandbox users' credentials, stored there by `sandboxd
	// install`, and the journal of what sessions stamped on the host.
	// Empty means statedir.Default(). On Linux the journal of placeholder
	// directories and cgroups, which a daemon killed before it could
	// remove them leaves for the next to remove; empty keeps none there.
	// macOS keeps nothing.
	StateDir string
	// SelfTest: the backend serves only `sandboxd --self-test`, which may
	// run beside a daemon on the same state directory, so on Linux it
	// keeps no journal (and cleans none of the daemon's).
	SelfTest bool
	// InitPath, on Linux, is the sandbox init (cmd/sandboxd-init); empty
	// means sandboxd-init beside the daemon's binary. Other OSes have no
	// init and refuse one.
	InitPath string
	// RuntimeDir is the directory of the daemon's socket, where on Linux
	// a root daemon keeps the identity files its sessions share, in a
	// directory "sandboxd-identity" of its own; empty keeps none, each
	// sandbox's init making its own.
	RuntimeDir string
	// Logf logs what the backend does not fail for but an operator
	// should know.
	Logf func(format string, args ...any)
}
