// Package socketpath says where the daemon listens by default, so that
// sandboxd and its clients agree without configuration.
package socketpath

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

// Env names the variable that overrides the default socket for both the
// daemon and its clients.
const Env = "SANDBOXD_SOCKET"

// Default is $SANDBOXD_SOCKET if set; otherwise /run/sandboxd/sandboxd.sock
// for root, $XDG_RUNTIME_DIR/sandboxd.sock for other users, and
// /tmp/sandboxd-<uid>/sandboxd.sock when XDG_RUNTIME_DIR is unset.
func Default() string {
	return resolve(os.Getenv, os.Getuid(), runtime.GOOS)
}

func resolve(getenv func(string) string, uid int, goos string) string {
	if p := getenv(Env); p != "" {
		return p
	}
	if goos == "windows" {
		// Windows has no unix-socket runtime directory; the daemon serves a
		// named pipe there.
		return `\\.\pipe\sandboxd`
	}
	if uid == 0 {
		return "/run/sandboxd/sandboxd.sock"
	}
	if dir := getenv("XDG_RUNTIME_DIR"); dir != "" {
		return filepath.Join(dir, "sandboxd.sock")
	}
	// A per-uid directory, so one user cannot squat another's socket path
	// in the shared /tmp.
	return filepath.Join("/tmp", "sandboxd-"+strconv.Itoa(uid), "sandboxd.sock")
}
