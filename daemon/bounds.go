package daemon

import (
	"fmt"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// Bounds on a request, checked before anything of it is built, so that an
// oversized request fails at once with the field it overflows instead of
// costing the daemon its time (every policy path is checked and mounted
// one by one) or failing late inside the sandbox (E2BIG from execve).
const (
	// maxPolicyPaths bounds read_roots, write, read_only and deny together.
	maxPolicyPaths = 1024
	// maxPathBytes is Linux's PATH_MAX; no OS resolves a longer path.
	maxPathBytes = 4096
	// maxAllow bounds network.allow.
	maxAllow = 1024
	// maxArgBytes is Linux's MAX_ARG_STRLEN: execve refuses any one
	// argument or NAME=VALUE longer than this, its NUL included.
	maxArgBytes = 128 << 10
	// maxEnvVars and maxEnvBytes bound command.env; with argv's bound they
	// stay below the 2 MiB execve allows under an 8 MiB stack.
	maxEnvVars  = 4096
	maxEnvBytes = 256 << 10
	// maxIDBytes is longer than any session id (16 hex digits).
	maxIDBytes = 64
	// Limits beyond these are no limit any kernel would set: pids.max
	// refuses more than PID_MAX_LIMIT (4M), and memory or CPU this large
	// is not a machine's.
	maxMemoryBytes = 1 << 50
	maxPids        = 4 << 20
	maxCPUMillis   = 1 << 20
)

// checkStart checks the sizes and ranges of a Start, before the policy and
// the command are looked at in detail (prepare).
func checkStart(st *sandboxdv1.Start) error {
	fs := st.GetPolicy().GetFilesystem()
	lists := []struct {
		field string
		paths []string
	}{
		{policy.FieldFilesystemReadRoots, fs.GetReadRoots()},
		{policy.FieldFilesystemWrite, fs.GetWrite()},
		{policy.FieldFilesystemReadOnly, fs.GetReadOnly()},
		{policy.FieldFilesystemDeny, fs.GetDeny()},
	}
	n := 0
	for _, l := range lists {
		n += len(l.paths)
		for i, p := range l.paths {
			if len(p) > maxPathBytes {
				return &RequestError{Field: fmt.Sprintf("policy.%s[%d]", l.field, i), Msg: fmt.Sprintf("%d bytes, longer than the %d a path may have", len(p), maxPathBytes)}
			}
		}
	}
	if n > maxPolicyPaths {
		return &RequestError{Field: "policy.filesystem", Msg: fmt.Sprintf("%d paths in read_roots, write, read_only and deny together, more than the %d allowed", n, maxPolicyPaths)}
	}
	if a := len(st.GetPolicy().GetNetwork().GetAllow()); a > maxAllow {
		return &RequestError{Field: "policy.network.allow", Msg: fmt.Sprintf("%d entries, more than the %d allowed", a, maxAllow)}
	}
	lim := st.GetPolicy().GetLimits()
	for _, l := range []struct {
		field    string
		val, max uint64
	}{
		{"policy.limits.memory_bytes", lim.GetMemoryBytes(), maxMemoryBytes},
		{"policy.limits.pids", uint64(lim.GetPids()), maxPids},
		{"policy.limits.cpu_millis", uint64(lim.GetCpuMillis()), maxCPUMillis},
	} {
		if l.val > l.max {
			return &RequestError{Field: l.field, Msg: fmt.Sprintf("%d is out of range: at most %d", l.val, l.max)}
		}
	}
	cmd := st.GetCommand()
	for i, a := range cmd.GetArgv() {
		if len(a) >= maxArgBytes {
			return &RequestError{Field: fmt.Sprintf("command.argv[%d]", i), Msg: fmt.Sprintf("%d bytes; one argument may have at most %d", len(a), maxArgBytes-1)}
		}
	}
	if len(cmd.GetCwd()) > maxPathBytes {
		return &RequestError{Field: "command.cwd", Msg: fmt.Sprintf("%d bytes, longer than the %d a path may have", len(cmd.GetCwd()), maxPathBytes)}
	}
	env := cmd.GetEnv()
	if len(env) > maxEnvVars {
		return &RequestError{Field: "command.env", Msg: fmt.Sprintf("%d variables, more than the %d allowed", len(env), maxEnvVars)}
	}
	size := 0
	for k, v := range env {
		if len(k)+len(v)+1 >= maxArgBytes {
			return &RequestError{Field: "command.env[" + quoteID(k) + "]", Msg: fmt.Sprintf("%d bytes as NAME=VALUE; one variable may have at most %d", len(k)+len(v)+1, maxArgBytes-1)}
		}
		size += len(k) + len(v) + 2
	}
	if size > maxEnvBytes {
		return &RequestError{Field: "command.env", Msg: fmt.Sprintf("%d bytes, more than the %d allowed", size, maxEnvBytes)}
	}
	return nil
}

// checkID refuses an id no session can have, without echoing it.
func checkID(field, id string) error {
	if len(id) > maxIDBytes {
		return &RequestError{Field: field, Msg: fmt.Sprintf("%d bytes, longer than any session id", len(id))}
	}
	return nil
}
