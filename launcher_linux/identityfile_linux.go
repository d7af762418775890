package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// identityStore keeps the identity files a root daemon's sessions share:
// one per content, which every session having that content binds
// read-only, one page-cache copy instead of a file in each init's tmpfs
// (two pages, an inode and a dentry apiece, unreclaimable, for as long as
// the session lasts).
//
// The daemon makes each session's read-only mount of a file from the
// descriptor it wrote the file through and sends it to the init
// (sandboxinit.MountStep.Shared): no name is looked up between the writing
// and the binding, so nothing done to the directory's names meanwhile
// changes what a sandbox gets. The files still need a name, as the kernel
// mounts no file that has none: they are in a directory of the daemon's
// own (Config.IdentityDir), root's and 0700, which no one else may list,
// read or change, locked (flock) for as long as the daemon keeps files
// there so that a second daemon beside the same socket keeps none, and
// emptied by the one that takes the lock of what a daemon that died left.
// A sandbox whose write roots or layers cover it has it masked, as the
// daemon's state directory is (launcher.Spec.Protect): a root caller's
// grant is ID-mapped to the sandbox uid and would show it all. The
// files are root's and 0444, and every mount of them read-only; no
// sandbox uid is 0.
type identityStore struct {
	path string
	logf func(format string, args ...any)

	mu sync.Mutex
	// dir is the directory, open and locked; nil where it could not be,
	// when each init makes its own files.
	dir *os.File
	// files are the files made, by content; idle those no session uses,
	// least recently used first, kept for the next session to have the
	// content (a client launching one command after another never has
	// two at once).
	files map[string]*identityFile
	idle  []*identityFile
	// next numbers the files' names.
	next int
	// logged: a file could not be made, which was logged; the next
	// failures are not.
	logged bool
}

// idleIdentityFiles is how many files no session uses the store keeps: a
// passwd and a group for each of eight callers launching in turn.
const idleIdentityFiles = 16

// identityFile is one of the store's files, held by refs sessions.
type identityFile struct {
	content string
	name    string
	file    *os.File // O_PATH
	refs    int
}

// newIdentityStore opens and locks the directory path, made if missing, and
// empties it; where it cannot, it logs why, and the store makes no files:
// each init makes its own.
func newIdentityStore(path string, logf func(format string, args ...any)) *identityStore {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &identityStore{path: path, logf: logf}
	dir, err := openIdentityDir(path)
	if err != nil {
		logf("identity files: %v; each sandbox's init makes its own /etc/passwd and /etc/group", err)
		return s
	}
	// What a daemon that died left; no other has the lock. Directories
	// are none of the store's.
	names, _ := dir.Readdirnames(-1)
	for _, n := range names {
		unix.Unlinkat(int(dir.Fd()), n, 0)
	}
	s.dir = dir
	return s
}

// openIdentityDir opens the directory path, made if missing, as the
// daemon's own: a directory of its uid, 0700 whatever the umask made it,
// locked, on a filesystem whose files hold what the daemon writes.
func openIdentityDir(path string) (*os.File, error) {
	// A directory removed by the daemon that held it as it stopped, and
	// found locked no more, is made anew.
	for range 2 {
		if err := unix.Mkdir(path, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		dir := os.NewFile(uintptr(fd), path)
		var st unix.Stat_t
		var fs unix.Statfs_t
		switch {
		case unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid():
			err = fmt.Errorf("%s is not uid %d's (uid %d)", path, os.Geteuid(), st.Uid)
		case unix.Fstatfs(fd, &fs) != nil || fs.Type == unix.FUSE_SUPER_MAGIC:
			// A FUSE filesystem's files hold what its server says.
			err = fmt.Errorf("%s is on a FUSE filesystem", path)
		case unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil:
			err = fmt.Errorf("%s is another daemon's (locked)", path)
		case unix.Fstat(fd, &st) == nil && st.Nlink == 0:
			dir.Close()
			continue
		default:
			if err = unix.Fchmod(fd, 0o700); err == nil {
				return dir, nil
			}
			err = fmt.Errorf("%s: %w", path, err)
		}
		dir.Close()
		return nil, err
	}
	return nil, fmt.Errorf("%s is removed as it is made", path)
}

// trees are what a sandbox whose write roots cover them has masked: the
// directory, even where another daemon has it.
func (s *identityStore) trees() []string {
	if s == nil {
		return nil
	}
	return []string{s.path}
}

// take is the file holding content, made if there is none, with a
// reference for a session, which gives it back with release; nil where
// the init is to make a file of its own (no content, no store, or a file
// that could not be made: the session then has what it had before
// sharing).
func (s *identityStore) take(content string) *identityFile {
	if s == nil || content == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil {
		return nil
	}
	f := s.files[content]
	if f != nil && !f.named() {
		// Removed by hand: the kernel mounts no file without a name.
		// A session planned with it may still be making its mount: its
		// descriptor goes when the last reference does (release).
		delete(s.files, content)
		s.idle = slices.DeleteFunc(s.idle, func(g *identityFile) bool { return g == f })
		if f.refs == 0 {
			f.file.Close()
		}
		f = nil
	}
	switch {
	case f == nil:
		var err error
		if f, err = s.make(content); err != nil {
			if !s.logged {
				s.logged = true
				s.logf("identity files: %v; the init of a sandbox whose file cannot be made makes its own (logged once)", err)
			}
			return nil
		}
		if s.files == nil {
			s.files = map[string]*identityFile{}
		}
		s.files[content] = f
	case f.refs == 0:
		s.idle = slices.DeleteFunc(s.idle, func(g *identityFile) bool { return g == f })
	}
	f.refs++
	return f
}

// release gives back a session's references; a file no session uses stays
// among the most recently used idle ones, or goes (the sessions binding
// it keep it).
func (s *identityStore) release(files map[string]*identityFile) {
	if s == nil || len(files) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range files {
		if f.refs--; f.refs > 0 || s.dir == nil {
			continue
		}
		if s.files[f.content] != f {
			// Replaced since (its name was removed by hand): not kept.
			f.file.Close()
			continue
		}
		s.idle = append(s.idle, f)
		if len(s.idle) > idleIdentityFiles {
			old := s.idle[0]
			s.idle = slices.Delete(s.idle, 0, 1)
			delete(s.files, old.content)
			s.remove(old)
		}
	}
}

// close removes the files and the directory and lets go of the lock; the
// sessions running keep the files they bind.
func (s *identityStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil {
		return
	}
	for _, f := range s.files {
		s.remove(f)
	}
	// Before the lock goes: a daemon that takes it finds the directory
	// removed and makes its own.
	os.Remove(s.path)
	s.dir.Close()
	s.files, s.idle, s.dir = nil, nil, nil
}

func (s *identityStore) remove(f *identityFile) {
	unix.Unlinkat(int(s.dir.Fd()), f.name, 0)
	f.file.Close()
}

// make writes content to a new file, root's and 0444 whatever the umask,
// and returns it with a descriptor of it that cannot write it.
func (s *identityStore) make(content string) (*identityFile, error) {
	var fd int
	var name string
	for {
		name = strconv.Itoa(s.next)
		s.next++
		var err error
		fd, err = unix.Openat(int(s.dir.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%s/%s: %w", s.path, name, err)
		}
	}
	w := os.NewFile(uintptr(fd), name)
	defer w.Close()
	_, err := w.WriteString(content)
	if err == nil {
		err = w.Chmod(0o444)
	}
	r := -1
	if err == nil {
		r, err = unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		unix.Unlinkat(int(s.dir.Fd()), name, 0)
		return nil, fmt.Errorf("%s/%s: %w", s.path, name, err)
	}
	return &identityFile{content: content, name: name, file: os.NewFile(uintptr(r), name)}, nil
}

// named: f still has a name, wherever it is.
func (f *identityFile) named() bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.file.Fd()), &st) == nil && st.Nlink > 0
}

// mount is a new read-only, noexec, nosuid, nodev mount of f, detached,
// for one init to attach (sandboxinit.PassMount): made from the daemon's
// descriptor, not found by name, and made here because an init may not
// clone a mount of the daemon's mount namespace.
func (f *identityFile) mount() (int, error) {
	rc, err := f.file.SyscallConn()
	if err != nil {
		return -1, err
	}
	tree := -1
	if cerr := rc.Control(func(fd uintptr) {
		tree, err = unix.OpenTree(int(fd), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	}); cerr != nil {
		return -1, fmt.Errorf("identity file: %w", cerr)
	}
	if err != nil {
		return -1, fmt.Errorf("identity file: open_tree: %w", err)
	}
	// Private: a clone of a mount stays in its peer group, and under a
	// host whose /run is shared (systemd's) a carve-out the init mounts on
	// /etc/passwd would propagate to the daemon's file and to every
	// session binding it.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("identity file: mount_setattr: %w", err)
	}
	return tree, nil
}
