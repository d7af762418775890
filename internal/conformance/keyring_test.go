//go:build linux || darwin

package conformance

// keyringCases: a sandbox reaches no key of the daemon's.
func keyringCases() []conformanceCase {
	return []conformanceCase{
		{name: "cannot reach the daemon's session keyring", custom: daemonKeyringUnreached,
			linuxOnly: "session keyrings are Linux's"},
	}
}
