package conformance

import "fmt"

// hugeArgv is an argv past the daemon's limit that sandboxctl can still be
// started with: 1.1 MiB, past the daemon's byte limit, within the host's
// ARG_MAX.
func hugeArgv() []string {
	return manyArgs(1100, 1024)
}

// enforcedHere says why the feature is not for TestUnenforceableIsRefused
// here: the Linux backend enforces the allowlist (namespaces set: a
// network namespace whose only way out is the daemon's proxy) and the
// cgroup limits, which cases() show; read LISTED it still refuses.
func enforcedHere(feature string) string {
	enforced := map[string]string{
		"network.mode=ALLOWLIST": "the allowlist cases of cases(); the landlock set refuses it, which its landlockRefuses say",
		"limits.memory_bytes":    "memory hog is killed by limits.memory_bytes, a program under it runs",
		"limits.pids":            "fork bomb is contained by limits.pids",
		"limits.cpu_millis":      "cpu burn is throttled to limits.cpu_millis",
		"limits.timeout":         "timeout kills the whole session tree, escaped processes too",
	}
	if c, ok := enforced[feature]; ok {
		return fmt.Sprintf("the Linux backend enforces %s: see %q", feature, c)
	}
	return ""
}
