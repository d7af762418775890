package launcherwindows

import (
	"fmt"
	"slices"
	"strings"
)

// environment is the block the process starts with: env as the daemon
// built it, with TEMP and TMP pointing at the session's private temporary
// directory, sorted as CreateProcess expects (by name, case-insensitively,
// as the OS upcases them). Windows looks variables up regardless of case,
// so two names that differ only in case are one variable set twice, and
// which value a program sees would depend on where it looks: refused.
func environment(env []string, tempDir string) ([]string, error) {
	type entry struct{ key, kv string }
	seen := map[string]string{}
	var out []entry
	for _, kv := range env {
		name, err := envName(kv)
		if err != nil {
			return nil, err
		}
		key := strings.ToUpper(name)
		if prev, ok := seen[key]; ok {
			return nil, fmt.Errorf("environment: %q and %q set the same variable (Windows compares names regardless of case)", prev, name)
		}
		seen[key] = name
		if key == "TEMP" || key == "TMP" {
			continue
		}
		out = append(out, entry{key, kv})
	}
	out = append(out, entry{"TEMP", "TEMP=" + tempDir}, entry{"TMP", "TMP=" + tempDir})
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	block := make([]string, len(out))
	for i, e := range out {
		block[i] = e.kv
	}
	return block, nil
}

// envName is the name of the "name=value" entry kv. A name may start with
// "=": Windows keeps each drive's current directory as "=C:=C:\dir".
func envName(kv string) (string, error) {
	if strings.ContainsRune(kv, 0) {
		return "", fmt.Errorf("environment: %q contains a NUL byte, which would end it early in the block", kv)
	}
	start := min(1, len(kv))
	i := strings.IndexByte(kv[start:], '=')
	if i < 0 || start+i == 1 && kv[0] == '=' {
		return "", fmt.Errorf("environment: %q is not name=value", kv)
	}
	return kv[:start+i], nil
}
