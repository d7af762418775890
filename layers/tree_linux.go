//go:build linux

package layers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tree reads and writes beneath one directory without following a
// symlink or crossing a mount on the way: the daemon does this as root in
// trees the sandbox wrote (the layer) or may still be writing (the host
// path), where a symlink put in the way must not lead it elsewhere.
type tree struct {
	root string
	fd   int
}

const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV

func openTree(root string) (*tree, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	return &tree{root: root, fd: fd}, nil
}

// treeOf is a tree at the root of the mount f.
func treeOf(f *os.File) (*tree, error) {
	fd, err := unix.Openat(int(f.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.Name(), err)
	}
	return &tree{root: f.Name(), fd: fd}, nil
}

func (t *tree) close() { unix.Close(t.fd) }

func (t *tree) openat(rel string, flags uint64) (int, error) {
	if rel == "" || rel == "." {
		return unix.Openat2(t.fd, ".", &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: beneath})
	}
	return unix.Openat2(t.fd, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: beneath})
}

// absent reports whether err means rel is not there as a path of this
// tree: missing, or reached only through a non-directory, a symlink or
// another mount.
func absent(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV)
}

// lstat is rel's status, ok false when it is not there.
func (t *tree) lstat(rel string) (st unix.Stat_t, ok bool, err error) {
	fd, err := t.openat(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if absent(err) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("open %s: %w", filepath.Join(t.root, rel), err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, false, fmt.Errorf("stat %s: %w", filepath.Join(t.root, rel), err)
	}
	return st, true, nil
}

func (t *tree) readlink(rel string) (string, error) {
	fd, err := t.openat(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", filepath.Join(t.root, rel), err)
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", filepath.Join(t.root, rel), err)
	}
	return string(buf[:n]), nil
}

// open opens the regular file rel for reading.
func (t *tree) open(rel string) (*os.File, error) {
	fd, err := t.openat(rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(t.root, rel), err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(t.root, rel)), nil
}

// names lists the directory rel.
func (t *tree) names(rel string) ([]string, error) {
	fd, err := t.openat(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(t.root, rel))
	defer f.Close()
	return f.Readdirnames(-1)
}

// parent opens the directory holding rel, for the *at calls on its base
// name.
func (t *tree) parent(rel string) (int, string, error) {
	fd, err := t.openat(filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", fmt.Errorf("open the directory of %s: %w", filepath.Join(t.root, rel), err)
	}
	return fd, filepath.Base(rel), nil
}

// removeAll removes rel and, if it is a directory, everything beneath.
// Something already gone is not an error.
func (t *tree) removeAll(rel string) error {
	dir, name, err := t.parent(rel)
	if absent(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return removeAt(dir, name, filepath.Join(t.root, rel))
}

func removeAt(dir int, name, shown string) error {
	uerr := unix.Unlinkat(dir, name, 0)
	if uerr == nil || errors.Is(uerr, unix.ENOENT) {
		return nil
	}
	if !errors.Is(uerr, unix.EISDIR) && !errors.Is(uerr, unix.EPERM) {
		return fmt.Errorf("remove %s: %w", shown, uerr)
	}
	// Not into another filesystem mounted there: what it holds is not
	// the layered path's, and rmdir would fail only once it was emptied.
	pfd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if errors.Is(uerr, unix.EPERM) && errors.Is(err, unix.ENOTDIR) {
		// Not a directory the unlink was refused for but the file
		// itself (another user's, in a sticky directory).
		return fmt.Errorf("remove %s: %w", shown, uerr)
	}
	if errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("remove %s: another filesystem is mounted there", shown)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", shown, err)
	}
	if err := ownerMayEmpty(pfd); err != nil {
		unix.Close(pfd)
		return fmt.Errorf("remove %s: %w", shown, err)
	}
	// Not held through the recursion: a level would cost two descriptors.
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(pfd)
	if err != nil {
		return fmt.Errorf("open %s: %w", shown, err)
	}
	f := os.NewFile(uintptr(fd), shown)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", shown, err)
	}
	for _, n := range names {
		if err := removeAt(fd, n, filepath.Join(shown, n)); err != nil {
			return err
		}
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", shown, err)
	}
	return nil
}

// ownerMayEmpty gives the directory open as the O_PATH descriptor fd its
// owner's read, write and search, when that owner is the thread's fsuid
// and not root and it lacks them, as go clean -modcache does (GNU rm -rf
// does not): a removal as the owner would stop at a directory it made
// read-only (go mod download makes them so), though the owner may change
// its mode and so remove it.
func ownerMayEmpty(fd int) error {
	fsuid, _ := unix.SetfsuidRetUid(-1)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if fsuid == 0 || st.Uid != uint32(fsuid) || st.Mode&0o700 == 0o700 {
		return nil
	}
	return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), st.Mode&0o7777|0o700)
}
