package conformance

import "fmt"

// hugeArgv is an argv past the daemon's limit that sandboxctl can still be
// started with. macOS's ARG_MAX is 1 MiB, environment included, which is
// the daemon's byte limit: an argv past that cannot start sandboxctl at
// all. 70000 one-byte arguments are past the daemon's count limit (64 Ki)
// and well within ARG_MAX.
func hugeArgv() []string {
	return manyArgs(70000, 1)
}

// enforcedHere says why the feature is not for TestUnenforceableIsRefused
// here: the darwin backend enforces listed read roots, which Linux's
// cannot, and its capabilities report says so; the allowlist and the
// memory, pids and CPU limits (no proxy, no cgroups) it must refuse.
func enforcedHere(feature string) string {
	for _, f := range suite.caps.GetFeatures() {
		if f.GetFeature() == feature && f.GetEnforceable() {
			return fmt.Sprintf("the darwin backend reports it enforces %s (mechanism set %q); this test is about what a backend refuses", feature, f.GetMechanismSet())
		}
	}
	return ""
}
