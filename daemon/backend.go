package daemon

// BackendOptions configures the OS backend DefaultBackend returns.
type BackendOptions struct {
	// SandboxUID and SandboxGID are what root callers' sandboxes run as; the
	// backend probes the host for that identity.
	SandboxUID, SandboxGID uint32
	// MechanismSet forces one of the backend's mechanism sets (on Linux
	// "namespaces" or "landlock", on macOS only "seatbelt"); empty lets the backend choose per
	// policy. A forced set that cannot enforce a policy refuses it.
	MechanismSet string
}
