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

// Default is $SANDBOXD_SOCKET if set; otherwise, for root,
// /run/sandboxd/sandboxd.sock (/var/run/sandboxd/sandboxd.sock on macOS);
// for other users $XDG_RUNTIME_DIR/sandboxd.sock, on macOS then
// $TMPDIR/sandboxd.sock, and /tmp/sandboxd-<uid>/sandboxd.sock when neither
// is set.
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
		if goos == "darwin" {
			// macOS has no /run; /var/run is its runtime directory.
			return "/var/run/sandboxd/sandboxd.sock"
		}
		return "/run/sandboxd/sandboxd.sock"
	}
	if dir := getenv("XDG_RUNTIME_DIR"); dir != "" {
		return filepath.Join(dir, "sandboxd.sock")
	}
	if goos == "darwin" {
		// launchd sets TMPDIR to the user's own 0700 directory under
		// /var/folders, the nearest macOS has to XDG_RUNTIME_DIR. Elsewhere
		// TMPDIR is often the shared /tmp and says nothing about who owns it.
		if dir := getenv("TMPDIR"); dir != "" {
			return filepath.Join(dir, "sandboxd.sock")
		}
	}
	// A per-uid directory, so one user cannot squat another's socket path
	// in the shared /tmp.
	return filepath.Join("/tmp", "sandboxd-"+strconv.Itoa(uid), "sandboxd.sock")
}
