//go:build unix

package launcherdarwin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/launcher"
)

// resolveExisting is the path the kernel reports for p, which is what
// Seatbelt matches rules against: the symlinks of its longest existing
// prefix resolved, the rest appended as it is.
func resolveExisting(p string) string {
	rest := ""
	for cur := filepath.Clean(p); ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == "/" || cur == "." {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// defaultPath is the search path execvp uses on macOS when the environment
// has none (_PATH_DEFPATH).
const defaultPath = "/usr/bin:/bin:/usr/sbin:/sbin"

// identity is who the sandboxed process runs as, to judge permission bits
// the way the kernel will.
type identity struct {
	uid  uint32
	gids []uint32
}

// may reports whether id has every bit of want (0o4 read, 0o2 write, 0o1
// execute or search) on fi: the owner's bits for the owner, the group's
// for a member of the group, the others' for everyone else.
func (id identity) may(fi os.FileInfo, want os.FileMode) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == id.uid:
		perm >>= 6
	case slices.Contains(id.gids, st.Gid):
		perm >>= 3
	}
	return perm&want == want
}

// execCheck judges, before anything starts, what sandbox-exec will do
// once the profile is applied: change to the working directory (the
// daemon does it, as the sandbox identity) and execvp the command with
// the PATH of the command's own environment. Seatbelt's refusals reach
// the daemon only as the command's exit status, so what can be known in
// advance is reported as the exec error it would be.
type execCheck struct {
	plan    *Plan
	id      identity
	resolve func(string) string
}

// cwd returns the error of changing to dir, nil when the sandbox can work
// there.
func (c execCheck) cwd(dir string) *launcher.ExecError {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: errnoOf(err)}
	case !fi.IsDir():
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: syscall.ENOTDIR}
	case !c.id.may(fi, 0o1):
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: syscall.EACCES, Hint: fmt.Sprintf("uid %d may not search it", c.id.uid)}
	}
	if d := c.unsearchable(dir); d != "" {
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: syscall.EACCES, Hint: fmt.Sprintf("uid %d may not search %s", c.id.uid, d)}
	}
	if hint := c.unreadable(dir); hint != "" {
		return &launcher.ExecError{Op: "chdir", Path: dir, Errno: syscall.EPERM, Hint: hint}
	}
	return nil
}

// command returns the error of executing argv0 from dir with env, nil when
// some file it names may be executed in the sandbox.
func (c execCheck) command(argv0, dir string, env []string) *launcher.ExecError {
	if argv0 == "" {
		return &launcher.ExecError{Op: "execve", Path: argv0, Errno: syscall.ENOENT}
	}
	if strings.Contains(argv0, "/") {
		return c.file(argv0, dir)
	}
	search := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	// execvp goes on past what it may not execute and reports EACCES
	// only when nothing later is found.
	var refused *launcher.ExecError
	for _, d := range filepath.SplitList(search) {
		if d == "" {
			d = "."
		}
		e := c.file(filepath.Join(d, argv0), dir)
		if e == nil {
			return nil
		}
		if e.Errno != syscall.ENOENT && e.Errno != syscall.ENOTDIR && refused == nil {
			refused = e
		}
	}
	if refused != nil {
		return refused
	}
	return &launcher.ExecError{Op: "execve", Path: argv0, Errno: syscall.ENOENT, Hint: "not found in the command's PATH " + search}
}

// file judges one candidate; a relative one is relative to dir.
func (c execCheck) file(path, dir string) *launcher.ExecError {
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, abs)
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return &launcher.ExecError{Op: "execve", Path: path, Errno: errnoOf(err)}
	case fi.IsDir():
		return &launcher.ExecError{Op: "execve", Path: path, Errno: syscall.EACCES, Hint: "it is a directory"}
	case !c.id.may(fi, 0o1):
		return &launcher.ExecError{Op: "execve", Path: path, Errno: syscall.EACCES, Hint: fmt.Sprintf("uid %d may not execute it", c.id.uid)}
	}
	if d := c.unsearchable(abs); d != "" {
		return &launcher.ExecError{Op: "execve", Path: path, Errno: syscall.EACCES, Hint: fmt.Sprintf("uid %d may not search %s", c.id.uid, d)}
	}
	if hint := c.unreadable(abs); hint != "" {
		return &launcher.ExecError{Op: "execve", Path: path, Errno: syscall.EPERM, Hint: hint}
	}
	return nil
}

// unsearchable returns the first directory above path, as the kernel
// walks it (symlinks resolved), that the sandbox identity may not search,
// "" when there is none: a root daemon sees through directories its
// sandboxes cannot enter.
func (c execCheck) unsearchable(path string) string {
	canon := c.resolve(path)
	var dirs []string
	for d := filepath.Dir(canon); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == "/" || d == "." {
			break
		}
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && !c.id.may(fi, 0o1) {
			return d
		}
	}
	return ""
}

// unreadable says why the profile refuses to read path, "" when it
// does not.
func (c execCheck) unreadable(path string) string {
	canon := c.resolve(path)
	if c.plan.Readable(canon) {
		return ""
	}
	if withinAny(canon, c.plan.deny) {
		return fmt.Sprintf("the sandbox may not read %s: it is below a filesystem.deny path", canon)
	}
	return fmt.Sprintf("the sandbox may not read %s: filesystem.read is LISTED and it is below no read root, write root or system path", canon)
}

// errnoOf is the errno of a failed stat, EACCES when there is none to
// tell: the path could not be used.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EACCES
}
