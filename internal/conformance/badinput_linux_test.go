package conformance

// hugeArgv is an argv past the daemon's limit that sandboxctl can still be
// started with: 1.1 MiB, past the daemon's byte limit, within the host's
// ARG_MAX.
func hugeArgv() []string {
	return manyArgs(1100, 1024)
}

// enforcedHere says why the feature is not for TestUnenforceableIsRefused
// here: never, the Linux backend enforces none of them on any host.
func enforcedHere(string) string {
	return ""
}
