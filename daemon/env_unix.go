//go:build !windows

package daemon

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envDefaults are a sandbox's variables before the request's own.
func envDefaults(tty bool, home string) (map[string]string, error) {
	term := "dumb"
	if tty {
		term = "xterm-256color"
	}
	return map[string]string{
		"PATH": defaultPath,
		"HOME": home,
		"TERM": term,
		"LANG": "C.UTF-8",
	}, nil
}

// envKey is the name under which the OS looks variable k up: k itself,
// variable names being case-sensitive here.
func envKey(k string) string { return k }

// sandboxDirs are the home directory of a sandbox running as uid and the
// working directory of a command that names none.
func (s *Service) sandboxDirs(uid uint32) (home, cwd string, err error) {
	return homeDir(s.cfg.PasswdFile, uid), "/", nil
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
