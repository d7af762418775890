package daemon

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	envSession  = "SANDBOXD_SESSION"
	envDigest   = "SANDBOXD_POLICY_DIGEST"
	envSocket   = "SANDBOXD_SOCKET"
)

// sessionIdentity is what the daemon tells a sandbox about its session.
type sessionIdentity struct {
	id, digest string
	// socket is the session socket's path inside the sandbox, empty when
	// the policy allows no children.
	socket string
}

// buildEnv returns the complete environment of a sandboxed process. It
// starts from fixed defaults rather than the daemon's environment, so
// nothing of the daemon's (tokens, proxies, sockets) leaks into a sandbox,
// and it ends with the session's identity, which the request cannot forge.
func buildEnv(tty bool, home string, overrides map[string]string, ids sessionIdentity) ([]string, error) {
	term := "dumb"
	if tty {
		term = "xterm-256color"
	}
	env := map[string]string{
		"PATH": defaultPath,
		"HOME": home,
		"TERM": term,
		"LANG": "C.UTF-8",
	}
	for k, v := range overrides {
		if err := checkEnvVar(k, v); err != nil {
			return nil, err
		}
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
	switch {
	case k == "":
		return &RequestError{Field: "command.env", Msg: "empty variable name"}
	case strings.ContainsAny(k, "=\x00"):
		return &RequestError{Field: field, Msg: "variable name contains '=' or NUL"}
	case strings.ContainsRune(v, 0):
		return &RequestError{Field: field, Msg: "value contains NUL"}
	case k == envSession || k == envDigest || k == envSocket:
		// A sandbox must not be able to claim another session's identity
		// or policy to whatever it talks to, nor be pointed at a socket
		// other than its own.
		return &RequestError{Field: field, Msg: "set by the daemon, cannot be overridden"}
	}
	return nil
}

// homeDir is the home directory of uid in the passwd file at path, or "/"
// when uid has no entry there. It reads the file rather than asking NSS
// because the sandbox sees the host's files, not a directory service.
func homeDir(path string, uid uint32) string {
	f, err := os.Open(path)
	if err != nil {
		return "/"
	}
	defer f.Close()
	want := strconv.FormatUint(uint64(uid), 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// name:password:uid:gid:gecos:home:shell
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 7 && fields[2] == want && filepath.IsAbs(fields[5]) {
			return fields[5]
		}
	}
	return "/"
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
