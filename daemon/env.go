package daemon

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	envSession = "SANDBOXD_SESSION"
	envDigest  = "SANDBOXD_POLICY_DIGEST"
	envSocket  = "SANDBOXD_SOCKET"
)

// sessionIdentity is what the daemon tells a sandbox about its session.
type sessionIdentity struct {
	id, digest string
	// socket is the session socket's path inside the sandbox, empty when
	// the policy allows no children.
	socket string
	// proxy is the address of the allowlist proxy inside the sandbox,
	// empty without one.
	proxy string
}

// buildEnv returns the complete environment of a sandboxed process. It
// starts from fixed defaults rather than the daemon's environment, so
// nothing of the daemon's (tokens, proxies, sockets) leaks into a sandbox,
// and it ends with the session's identity, which the request cannot forge.
func buildEnv(tty bool, home string, overrides map[string]string, ids sessionIdentity) ([]string, error) {
	env, err := envDefaults(tty, home)
	if err != nil {
		return nil, err
	}
	if ids.proxy != "" {
		// Defaults the request may change: they only tell programs where
		// the way out is, and a program that ignores them has none.
		for k, v := range proxyEnv(ids.proxy) {
			env[k] = v
		}
	}
	// Where names are case-insensitive (Windows), "Path" in the request
	// replaces the default "PATH" rather than standing beside it.
	given := make(map[string]string, len(overrides))
	for k, v := range overrides {
		if err := checkEnvVar(k, v); err != nil {
			return nil, err
		}
		if other, dup := given[envKey(k)]; dup {
			a, b := min(k, other), max(k, other)
			return nil, &RequestError{Field: "command.env", Msg: fmt.Sprintf("%q and %q name the same variable on this OS", a, b)}
		}
		given[envKey(k)] = k
	}
	for d := range env {
		if k, ok := given[envKey(d)]; ok && k != d {
			delete(env, d)
		}
	}
	for k, v := range overrides {
		env[k] = v
	}
	env[envSession] = ids.id
	env[envDigest] = ids.digest
	if ids.socket != "" {
		env[envSocket] = ids.socket
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

func checkEnvVar(k, v string) error {
	field := "command.env[" + strconv.Quote(k) + "]"
	switch key := envKey(k); {
	case k == "":
		return &RequestError{Field: "command.env", Msg: "empty variable name"}
	case strings.ContainsAny(k, "=\x00"):
		return &RequestError{Field: field, Msg: "variable name contains '=' or NUL"}
	case strings.ContainsRune(v, 0):
		return &RequestError{Field: field, Msg: "value contains NUL"}
	case key == envKey(envSession) || key == envKey(envDigest) || key == envKey(envSocket):
		// A sandbox must not be able to claim another session's identity
		// or policy to whatever it talks to, nor be pointed at a socket
		// other than its own.
		return &RequestError{Field: field, Msg: "set by the daemon, cannot be overridden"}
	}
	return nil
}

// checkCommand rejects commands the backend could only fail on later, with
// a less precise error.
func checkCommand(argv []string, cwd string) error {
	if len(argv) == 0 || argv[0] == "" {
		return &RequestError{Field: "command.argv", Msg: "missing command"}
	}
	if len(argv) > maxArgs {
		return &RequestError{Field: "command.argv", Msg: fmt.Sprintf("huge argv: %d arguments, at most %d allowed", len(argv), maxArgs)}
	}
	size := 0
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return &RequestError{Field: fmt.Sprintf("command.argv[%d]", i), Msg: "contains NUL"}
		}
		size += len(a) + 1
	}
	if size > maxArgvBytes {
		return &RequestError{Field: "command.argv", Msg: fmt.Sprintf("huge argv: %d bytes, at most %d allowed", size, maxArgvBytes)}
	}
	if cwd != "" && !filepath.IsAbs(cwd) {
		return &RequestError{Field: "command.cwd", Msg: fmt.Sprintf("must be an absolute path, got %q", cwd)}
	}
	if strings.ContainsRune(cwd, 0) {
		return &RequestError{Field: "command.cwd", Msg: "contains NUL"}
	}
	return nil
}

// Limits on argv, below what execve accepts, so an oversized request fails
// here with a field name instead of as E2BIG inside the sandbox.
const (
	maxArgs      = 64 << 10
	maxArgvBytes = 1 << 20
)

// proxyEnv points the variables programs read for a proxy at addr, in both
// spellings: curl reads only the lower-case http_proxy, others only upper
// case. The sandbox's own loopback is private, so it is reached directly.
func proxyEnv(addr string) map[string]string {
	httpURL, socksURL := "http://"+addr, "socks5h://"+addr
	noProxy := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": httpURL, "http_proxy": httpURL,
		"HTTPS_PROXY": httpURL, "https_proxy": httpURL,
		"ALL_PROXY": socksURL, "all_proxy": socksURL,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
	}
}
