package daemon

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/windows"
)

// envDefaults are a sandbox's variables before the request's own: what
// Windows programs expect to find (the system directories, the command
// interpreter, the executable extensions), taken from the system rather
// than from the daemon's own environment.
func envDefaults(tty bool, home string) (map[string]string, error) {
	root, err := systemRoot()
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"SystemRoot":  root,
		"windir":      root,
		"ComSpec":     root + `\system32\cmd.exe`,
		"PATH":        root + `\system32;` + root + `;` + root + `\System32\Wbem;` + root + `\System32\WindowsPowerShell\v1.0\`,
		"PATHEXT":     ".COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC",
		"USERPROFILE": home,
		"HOME":        home,
	}
	// Only a console session renders escape sequences (ConPTY); a program
	// writing to pipes must not be told it may send them.
	if tty {
		env["TERM"] = "xterm-256color"
	}
	return env, nil
}

// envKey is the name under which Windows looks variable k up: names are
// case-insensitive there.
func envKey(k string) string { return strings.ToUpper(k) }

// sandboxDirs are the home directory of a sandbox and the working
// directory of a command that names none: the root of the system drive
// for both. The daemon cannot name a profile directory: the backend picks
// the sandbox user per policy and logs it on for each session.
func (s *Service) sandboxDirs(uint32) (home, cwd string, err error) {
	root, err := systemRoot()
	if err != nil {
		return "", "", err
	}
	drive := filepath.VolumeName(root) + `\`
	return drive, drive, nil
}

// systemRoot is %SystemRoot% as the system reports it, whatever the
// daemon's environment says.
func systemRoot() (string, error) {
	dir, err := windows.GetSystemWindowsDirectory()
	if err != nil {
		return "", fmt.Errorf("windows directory: %w", err)
	}
	return dir, nil
}
