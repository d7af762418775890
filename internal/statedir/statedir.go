// Package statedir says where the daemon keeps what must outlive it (the
// audit log), so that sandboxd and the tools reading its state agree
// without configuration, and on Windows keeps that directory to one
// daemon at a time.
package statedir

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

// Env names the variable that overrides the default state directory.
const Env = "SANDBOXD_STATE_DIR"

// Default is $SANDBOXD_STATE_DIR if set; otherwise /var/lib/sandboxd for
// root, $XDG_STATE_HOME/sandboxd or ~/.local/state/sandboxd for other
// users; on macOS /var/db/sandboxd for root and ~/Library/Application
// Support/sandboxd for other users; and %ProgramData%\sandboxd on Windows.
func Default() string {
	home, _ := os.UserHomeDir()
	return resolve(os.Getenv, os.Getuid(), home, runtime.GOOS)
}

func resolve(getenv func(string) string, uid int, home, goos string) string {
	if d := getenv(Env); d != "" {
		return d
	}
	switch goos {
	case "windows":
		if pd := getenv("ProgramData"); pd != "" {
			return filepath.Join(pd, "sandboxd")
		}
		return `C:\ProgramData\sandboxd`
	case "darwin":
		// macOS keeps system daemons' state in /var/db/<name> and users' in
		// ~/Library/Application Support, as os.UserConfigDir does there;
		// the XDG variables are not a macOS convention.
		if uid == 0 {
			return "/var/db/sandboxd"
		}
		if home != "" {
			return filepath.Join(home, "Library", "Application Support", "sandboxd")
		}
	default:
		if uid == 0 {
			return "/var/lib/sandboxd"
		}
		if d := getenv("XDG_STATE_HOME"); d != "" {
			return filepath.Join(d, "sandboxd")
		}
		if home != "" {
			return filepath.Join(home, ".local", "state", "sandboxd")
		}
	}
	// No home to keep state in: a per-uid directory, as for the socket.
	return filepath.Join("/var/tmp", "sandboxd-state-"+strconv.Itoa(uid))
}
