//go:build !windows

package daemon

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	return sandboxHomes.lookup(s.cfg.PasswdFile, uid), "/", nil
}

// sandboxHomes is the daemon's one passwd cache: the file it reads is the
// host's, whichever Service asks.
var sandboxHomes passwdHomes

// passwdHomes are the home directories in a passwd file, read again only
// when the file is another or has changed: every launch looks its
// sandbox's HOME up, and reading and splitting the whole file each time
// was a tenth of the daemon's own work per launch. The file is read rather
// than NSS asked because the sandbox sees the host's files, not a
// directory service.
type passwdHomes struct {
	mu    sync.Mutex
	stamp passwdStamp
	homes map[string]string // uid as the file spells it → home
}

// passwdStamp tells a passwd file from its earlier versions: tools that
// edit it write a new file and rename it over the old (another inode), and
// an edit in place changes the modification time or the size.
type passwdStamp struct {
	path     string
	dev, ino uint64
	size     int64
	mtime    int64
}

// lookup is the home directory of uid in the passwd file at path, or "/"
// when uid has no entry there with an absolute home.
func (c *passwdHomes) lookup(path string, uid uint32) string {
	st, err := os.Stat(path)
	if err != nil {
		return "/"
	}
	stamp := passwdStamp{path: path, size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		stamp.dev, stamp.ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.homes == nil || c.stamp != stamp {
		// A file replaced after the Stat is read under the old stamp,
		// and so read again next time.
		c.homes, c.stamp = readHomes(path), stamp
	}
	if home, ok := c.homes[strconv.FormatUint(uint64(uid), 10)]; ok {
		return home
	}
	return "/"
}

// readHomes reads the passwd file at path: for each uid, the home of its
// first entry whose home is absolute.
func readHomes(path string) map[string]string {
	homes := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return homes
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// name:password:uid:gid:gecos:home:shell
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 7 || !filepath.IsAbs(fields[5]) {
			continue
		}
		if _, ok := homes[fields[2]]; !ok {
			homes[fields[2]] = fields[5]
		}
	}
	return homes
}
