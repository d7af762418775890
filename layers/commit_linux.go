//go:build linux

package layers

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Commit applies session's layers to their paths and removes them. Each
// file is written beside its place and renamed over it, so a reader of
// the path sees the old file or the new one, never a part. What the
// session added is owned by the path's owner; what it modified keeps its
// owner. Set-user-ID and set-group-ID bits are not carried over: the
// sandbox could set them on files the host's owner would then run. A file
// the layer changes that changed on the host since the layer was made
// fails the commit with a *ConflictError, unless force. A change at or
// beneath a path of keep, or that removes or replaces a directory holding
// one (the daemon's own state and sockets), fails the commit before
// anything is applied, force or not.
func (s *Store) Commit(session string, force bool, keep []string) ([]Diff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.settle(session)
	if err != nil {
		return nil, err
	}
	var out []Diff
	for _, r := range recs {
		d, err := s.commit(r, force, keep)
		if err != nil {
			return out, err
		}
		out = append(out, d)
		if err := s.remove(r); err != nil {
			return out, err
		}
	}
	return out, nil
}

// testHookApply, when set, runs in a commit between the comparison and
// the changes: a test changes the layered path there, as a racing owner
// of it would.
var testHookApply func()

func (s *Store) commit(r record, force bool, keep []string) (Diff, error) {
	var who Owner
	if r.Owner != 0 {
		if r.Creds == nil {
			return Diff{}, fmt.Errorf("layer of %s records not the groups of its owner (uid %d), which a commit writes the path with (an earlier daemon made it): diff still shows its changes, and a layer made on it (run --layer-from) has them and can be committed; or discard it: %w", r.Path, r.Owner, ErrStale)
		}
		who = *r.Creds
	}
	base, err := r.openPath()
	if err != nil {
		return Diff{}, err
	}
	defer base.close()
	view, uppers, unmount, err := s.view(r, base)
	if err != nil {
		return Diff{}, err
	}
	done := sync.OnceFunc(unmount)
	defer done()
	d, err := diffTrees(view, base, uppers, false, reader{})
	if err != nil {
		return Diff{}, err
	}
	d.Layer = r.Info
	if err := refuseKept(r.Path, d.Changes, keep); err != nil {
		return Diff{}, err
	}
	if !force {
		m, err := readManifest(filepath.Join(s.manifests(), r.Manifest))
		if err != nil {
			return Diff{}, err
		}
		conflicts, err := conflicts(base, m, d.Changes)
		if err != nil {
			return Diff{}, err
		}
		if len(conflicts) > 0 {
			return Diff{}, &ConflictError{Path: r.Path, Files: conflicts}
		}
	}
	var root unix.Stat_t
	if err := unix.Fstat(base.fd, &root); err != nil {
		return Diff{}, fmt.Errorf("stat %s: %w", r.Path, err)
	}
	for _, c := range d.Changes {
		if (c.Kind == Added || c.Kind == Modified) && !committable(c.NewMode) {
			return Diff{}, fmt.Errorf("commit %s: a %s cannot be committed (only files, directories, symlinks and FIFOs): discard the layer, or remove it in a session on it (--layer-from)", filepath.Join(r.Path, c.Path), modeName(c.NewMode))
		}
		if (c.Kind == Added || c.Kind == Modified) && c.NewMode.IsRegular() {
			// A file of another user's in the layer is a copy the
			// overlay made as root of a file the sandbox renamed or
			// changed: the commit would give it to the path's owner,
			// who may not have been able to read it.
			st, ok, err := view.lstat(c.Path)
			if err != nil {
				return Diff{}, err
			}
			if owner := (reader{uid: root.Uid, gid: root.Gid}); ok && st.Uid != root.Uid && !owner.may(&st, 4) {
				return Diff{}, fmt.Errorf("commit %s: the layer's file is uid %d's, mode %04o, which %s's owner may not read (a copy of a file the sandbox renamed or changed): discard the layer, or remove it in a session on it (--layer-from)", filepath.Join(r.Path, c.Path), st.Uid, st.Mode&0o7777, r.Path)
			}
		}
		if c.Kind != ModeChanged {
			continue
		}
		st, ok, err := base.lstat(c.Path)
		if err != nil {
			return Diff{}, err
		}
		if ok {
			if err := mayChmod(&st, c, root.Uid); err != nil {
				return Diff{}, fmt.Errorf("commit %s: %w", filepath.Join(r.Path, c.Path), err)
			}
		}
	}
	if err := mayWrite(base, d.Changes, who); err != nil {
		return Diff{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	// What the layers hold is read from their upper directories from
	// here on: a file of this layer's own is moved to the path rather
	// than copied (the layer goes after the commit), which its upper
	// directory must not be mounted for.
	done()
	src, err := openUppers(uppers)
	if err != nil {
		return Diff{}, err
	}
	defer src.close()
	if testHookApply != nil {
		testHookApply()
	}
	var later []dirMode
	// stopped sets the modes deferred so far of the changes before n,
	// deepest first, as a commit that ends does (one failing does not stop
	// the others: each is the mode its change is told applied with), and
	// says which changes were applied. The directories above failed, a
	// change not made, keep the owner's writing and searching, so that a
	// commit again once its cause is mended can make what they hold.
	stopped := func(n int, failed string) []Change {
		var unset []dirMode
		for j := len(later) - 1; j >= 0; j-- {
			above := failed != "" && strings.HasPrefix(failed, d.Changes[later[j].change].Path+"/")
			if above || later[j].set() != nil {
				unset = append(unset, later[j])
			}
		}
		return appliedBut(d.Changes[:n], unset)
	}
	for i, c := range d.Changes {
		if err := apply(src, base, c, root.Uid, root.Gid, who, func(set func() error) { later = append(later, dirMode{i, set}) }); err != nil {
			pe := &PartialError{Path: r.Path, Applied: stopped(i, c.Path), Err: fmt.Errorf("commit %s: %w", filepath.Join(r.Path, c.Path), err)}
			if c.OldMode.IsDir() && (c.Kind == Deleted || !c.NewMode.IsDir()) {
				pe.Partly = &c
			}
			return Diff{}, pe
		}
		// The change was made, but a thread's credentials were not set
		// back after it: nothing more is (the owner's deferred modes
		// neither: stopped's setting them as the owner fails).
		if lost := credsLost.Load(); lost != nil && who.UID != 0 {
			return Diff{}, &PartialError{Path: r.Path, Applied: stopped(i+1, ""), Err: fmt.Errorf("commit %s: %w", filepath.Join(r.Path, c.Path), *lost)}
		}
	}
	// Deepest first, as tar and cp -a do: a directory's mode that denies
	// its owner writing or searching it is set once what it holds is
	// made, and its parents' after it.
	for j := len(later) - 1; j >= 0; j-- {
		err := later[j].set()
		unset := later[:j+1]
		if lost := credsLost.Load(); err == nil && lost != nil && who.UID != 0 {
			err, unset = *lost, later[:j]
		}
		if err != nil {
			c := d.Changes[later[j].change]
			return Diff{}, &PartialError{Path: r.Path, Applied: appliedBut(d.Changes, unset), Err: fmt.Errorf("commit %s: setting its mode once what it holds was made: %w", filepath.Join(r.Path, c.Path), err)}
		}
	}
	return d, nil
}

// dirMode sets the mode of the directory of the change at index change
// of a commit, after all changes are applied.
type dirMode struct {
	change int
	set    func() error
}

// appliedBut is changes but those whose directory mode, deferred, is in
// unset: a change is applied once its mode is set.
func appliedBut(changes []Change, unset []dirMode) []Change {
	var applied []Change
	for i, c := range changes {
		if !slices.ContainsFunc(unset, func(m dirMode) bool { return m.change == i }) {
			applied = append(applied, c)
		}
	}
	return applied
}

// ownerRWX is the owner's read, write and search: a commit makes a
// directory's content, and a removal empties one, as its owner, which
// needs them all.
const ownerRWX = 0o700

// mayWrite refuses changes, before any is applied, when who may not write
// and search a directory of base that one of them is made or removed in
// (as the kernel judges it, by faccessat with who's ids): the commit
// would stop there, halfway.
func mayWrite(base *tree, changes []Change, who Owner) error {
	if who.UID == 0 {
		return nil
	}
	checked := map[string]bool{}
	for _, c := range changes {
		d := filepath.Dir(c.Path)
		if c.Kind == ModeChanged || checked[d] {
			continue
		}
		checked[d] = true
		err := who.as(func() error {
			fd, err := base.openat(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
			if absent(err) {
				// Made by this commit, as who.
				return nil
			}
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Faccessat2(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.W_OK|unix.X_OK, unix.AT_EACCESS)
		})
		if err != nil {
			return fmt.Errorf("the layer changes %s, in a directory its owner may not write: %w", c.Path, err)
		}
	}
	return nil
}

// uppers are the upper directories of a chain of layers, this one's
// first.
type uppers []*tree

func openUppers(dirs []string) (uppers, error) {
	var out uppers
	for _, d := range dirs {
		t, err := openTree(d)
		if err != nil {
			out.close()
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (u uppers) close() {
	for _, t := range u {
		t.close()
	}
}

// find is the upper directory whose entry at rel is the one the merged
// tree shows (the first that has one), and whether it is this layer's own.
func (u uppers) find(rel string) (*tree, bool, error) {
	for i, t := range u {
		_, ok, err := t.lstat(rel)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return t, i == 0, nil
		}
	}
	return nil, false, fmt.Errorf("%s is in no layer", rel)
}

// conflicts are the paths among changes (and, for a directory the layer
// removes or replaces, beneath it) that differ on the host from the
// manifest.
func conflicts(base *tree, m map[string]manifestEntry, changes []Change) ([]string, error) {
	var out []string
	check := func(p string) error {
		st, ok, err := base.lstat(p)
		if err != nil {
			return err
		}
		was, known := m[p]
		if ok != known || ok && entryOf(&st) != was {
			out = append(out, p)
		}
		return nil
	}
	for _, c := range changes {
		if err := check(c.Path); err != nil {
			return nil, err
		}
		if !c.OldMode.IsDir() || c.Kind == ModeChanged || c.Kind == Added {
			continue
		}
		beneath := map[string]bool{}
		for p := range m {
			if strings.HasPrefix(p, c.Path+"/") {
				beneath[p] = true
			}
		}
		if err := addBase(base, c.Path, beneath); err != nil {
			return nil, err
		}
		for p := range beneath {
			if err := check(p); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// commitPerm is the permission bits a committed entry gets.
func commitPerm(m fs.FileMode) uint32 {
	perm := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		perm |= unix.S_ISVTX
	}
	if m.IsDir() && m&fs.ModeSetgid != 0 {
		// A directory's set-group-ID bit only passes its group on.
		perm |= unix.S_ISGID
	}
	return perm
}

// apply applies c to base. A directory's mode without the owner's
// read, write and search is not set at once but handed to later, to set
// once the commit has made what the directory holds.
func apply(src uppers, base *tree, c Change, uid, gid uint32, who Owner, later func(func() error)) error {
	if c.Kind == Deleted {
		return who.as(func() error { return base.removeAll(c.Path) })
	}
	// Opened as the owner: it must be able to reach the directory.
	var dir int
	var name string
	if err := who.as(func() (err error) { dir, name, err = base.parent(c.Path); return err }); err != nil {
		return err
	}
	defer unix.Close(dir)
	if c.Kind == ModeChanged {
		if c.NewMode&fs.ModeSymlink != 0 {
			return nil
		}
		perm := commitPerm(c.NewMode)
		check := func(st *unix.Stat_t) error { return mayChmod(st, c, uid) }
		if c.NewMode.IsDir() && perm&ownerRWX != ownerRWX {
			later(func() error { return setMode(base, c.Path, who, who, perm, check) })
			return nil
		}
		return who.as(func() error { return chmodAt(dir, name, perm, check) })
	}
	var old unix.Stat_t
	hadOld := unix.Fstatat(dir, name, &old, unix.AT_SYMLINK_NOFOLLOW) == nil
	if hadOld && old.Mode&unix.S_IFMT == unix.S_IFREG && c.NewMode.IsRegular() && (uid == 0 || old.Uid == uid) {
		// A modified file keeps its owner, where the path's owner could
		// have made the file so: one not root could not write another
		// user's file, only replace it with a file of its own.
		uid, gid = old.Uid, old.Gid
	}
	if hadOld && (old.Mode&unix.S_IFMT == unix.S_IFDIR) != c.NewMode.IsDir() {
		// A type change: what was there goes first, whole.
		if err := who.as(func() error { return removeAt(dir, name, filepath.Join(base.root, c.Path)) }); err != nil {
			return err
		}
		hadOld = false
	}
	perm := commitPerm(c.NewMode)
	switch {
	case c.NewMode.IsDir():
		if !hadOld {
			if err := who.as(func() error { return unix.Mkdirat(dir, name, ownerRWX) }); err != nil {
				return err
			}
			made, err := giveMade(dir, name, unix.S_IFDIR, who.UID, uid, gid, perm|ownerRWX)
			if err != nil || perm&ownerRWX == ownerRWX {
				return err
			}
			// Set as root, as giveMade gave it: the owner's chmod would
			// lose a set-group-ID bit where the owner is not in the
			// directory's group (the kernel clears it without
			// CAP_FSETID). The check is giveMade's trust: the inode it
			// gave, still a directory of the owner's.
			later(func() error {
				return setMode(base, c.Path, who, Owner{}, perm, func(st *unix.Stat_t) error {
					if st.Dev != made.Dev || st.Ino != made.Ino || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uid || st.Gid != gid {
						return fmt.Errorf("%s was replaced since the commit made it", name)
					}
					return nil
				})
			})
			return nil
		}
		// There since the comparison, with force: the path's owner's
		// alone has its mode changed.
		check := func(st *unix.Stat_t) error {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uid && uid != 0 {
				return fmt.Errorf("%s is not a directory of the path's owner: %w", name, ErrNotOwner)
			}
			return nil
		}
		if perm&ownerRWX != ownerRWX {
			later(func() error { return setMode(base, c.Path, who, who, perm, check) })
			return nil
		}
		return who.as(func() error { return chmodAt(dir, name, perm, check) })
	case c.NewMode.IsRegular():
		from, own, err := src.find(c.Path)
		if err != nil {
			return err
		}
		if own {
			err := moveFile(from, c.Path, dir, name, uid, gid, perm, who)
			if !errors.Is(err, unix.EXDEV) {
				return err
			}
		}
		return replaceFile(from, c.Path, dir, name, uid, gid, perm, who)
	case c.NewMode&fs.ModeSymlink != 0:
		from, _, err := src.find(c.Path)
		if err != nil {
			return err
		}
		target, err := from.readlink(c.Path)
		if err != nil {
			return err
		}
		tmp := tempName(name)
		return makeAndRename(dir, tmp, name, who, func() error { return unix.Symlinkat(target, dir, tmp) }, func() error {
			_, err := giveMade(dir, tmp, unix.S_IFLNK, who.UID, uid, gid, 0)
			return err
		})
	case c.NewMode&fs.ModeNamedPipe != 0:
		tmp := tempName(name)
		return makeAndRename(dir, tmp, name, who, func() error { return unix.Mkfifoat(dir, tmp, 0o600) }, func() error {
			_, err := giveMade(dir, tmp, unix.S_IFIFO, who.UID, uid, gid, perm)
			return err
		})
	}
	return fmt.Errorf("a %s cannot be committed", modeName(c.NewMode))
}

// setMode sets the permission bits of rel in base to perm, as by, once
// check has passed the inode there, reached as who.
func setMode(base *tree, rel string, who, by Owner, perm uint32, check func(*unix.Stat_t) error) error {
	var dir int
	var name string
	if err := who.as(func() (err error) { dir, name, err = base.parent(rel); return err }); err != nil {
		return err
	}
	defer unix.Close(dir)
	return by.as(func() error { return chmodAt(dir, name, perm, check) })
}

// makeAndRename makes tmp in dir as who with mk, gives it its owner and
// mode with give (as root, through a descriptor of what was made), and
// renames it over name as who.
func makeAndRename(dir int, tmp, name string, who Owner, mk, give func() error) error {
	if err := who.as(mk); err != nil {
		return err
	}
	if err := give(); err != nil {
		who.as(func() error { return unix.Unlinkat(dir, tmp, 0) })
		return err
	}
	return who.as(func() error { return renameInto(dir, tmp, name) })
}

// committable says whether a commit can make an entry of mode m.
func committable(m fs.FileMode) bool {
	return m.IsRegular() || m.IsDir() || m&(fs.ModeSymlink|fs.ModeNamedPipe) != 0
}

// modeName names the type of m where Change.Type says "other".
func modeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return fileType(m)
}

// mayChmod refuses a commit's change of the mode of st unless st is the
// inode the comparison found (not one put there since) and the layered
// path's owner's, or that owner is root: the daemon changes it as root,
// and a sandbox that replaced another uid's file in its owner's tree by a
// copy with another mode would otherwise have it change that uid's file,
// which may be a hard link of any file on the filesystem.
func mayChmod(st *unix.Stat_t, c Change, owner uint32) error {
	switch {
	case st.Dev != c.baseDev || st.Ino != c.baseIno:
		return fmt.Errorf("the layer changes the mode of %s, which was replaced since it was compared; commit again", c.Path)
	case st.Uid != owner && owner != 0:
		return fmt.Errorf("the layer changes the mode of %s, which uid %d owns, not the path's owner (uid %d): a commit changes no mode of another's file: %w", c.Path, st.Uid, owner, ErrNotOwner)
	}
	return nil
}

// chmodAt sets the permission bits of name in dir, a directory of the
// layered path, to perm, once check has passed the inode there: through a
// descriptor of that inode, opened without following a symlink or
// crossing a mount, as fchmodat would follow a symlink put there since.
func chmodAt(dir int, name string, perm uint32, check func(*unix.Stat_t) error) error {
	fd, st, err := openEntry(dir, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%s is a symlink now", name)
	}
	if err := check(&st); err != nil {
		return err
	}
	return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), perm)
}

// openEntry opens name in dir as an O_PATH descriptor, following no
// symlink and crossing no mount, and stats what it opened.
func openEntry(dir int, name string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// testHookMade, when set, runs in a commit once it has made an entry, by
// its name: a test puts another in its place there.
var testHookMade func(name string)

// giveMade gives name in dir, which the commit has just made as an entry
// of type typ (S_IFDIR, S_IFLNK, S_IFIFO) with the fsuid maker, the owner
// uid and gid and, but for a symlink, the mode perm: as root, through a
// descriptor of the inode there, once it is seen to be maker's of that
// type (and, for a directory, empty), as the path's owner may put another
// in its place meanwhile. It returns the status of what it gave.
func giveMade(dir int, name string, typ, maker, uid, gid, perm uint32) (unix.Stat_t, error) {
	if testHookMade != nil {
		testHookMade(name)
	}
	flags := uint64(unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC)
	if typ == unix.S_IFDIR {
		flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: flags, Resolve: beneath})
	var st unix.Stat_t
	if err != nil {
		return st, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return st, err
	}
	if st.Mode&unix.S_IFMT != typ || st.Uid != maker {
		return st, fmt.Errorf("%s was replaced as it was made", name)
	}
	if typ == unix.S_IFDIR {
		if names, err := f.Readdirnames(1); len(names) > 0 || !errors.Is(err, io.EOF) {
			return st, fmt.Errorf("%s was replaced as it was made", name)
		}
	}
	if err := unix.Fchownat(fd, "", int(uid), int(gid), unix.AT_EMPTY_PATH); err != nil {
		return st, err
	}
	if typ == unix.S_IFLNK {
		return st, nil
	}
	return st, unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), perm)
}

func tempName(name string) string {
	return ".sandboxd-commit-" + randomSuffix() + "-" + name[:min(len(name), 100)]
}

func renameInto(dir int, tmp, name string) error {
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return err
	}
	return nil
}

// moveFile gives the upper directory's file rel the owner and mode it is
// committed with and links it over name in dir as who: no copy, where the
// layer and the path share a filesystem (EXDEV where they do not).
func moveFile(up *tree, rel string, dir int, name string, uid, gid, perm uint32, who Owner) error {
	udir, uname, err := up.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(udir)
	// A process that kept a descriptor into the overlay can still change
	// the upper directory: the file is given its owner and mode, and
	// linked into the tree, through a descriptor of a regular file, never
	// by a name something else could take meanwhile.
	fd, st, err := openEntry(udir, uname)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s in the layer is no longer a regular file", rel)
	}
	// The chown also drops the file's capabilities (security.capability),
	// which the sandbox may have set and the owner would then run with:
	// the kernel removes them on every chown of a file, the same owner's
	// included.
	if err := unix.Fchownat(fd, "", int(uid), int(gid), unix.AT_EMPTY_PATH); err != nil {
		return err
	}
	if testHookMove != nil {
		testHookMove(rel)
	}
	if err := unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), perm); err != nil {
		return err
	}
	tmp := tempName(name)
	err = who.as(func() error {
		if err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), dir, tmp, unix.AT_SYMLINK_FOLLOW); err != nil {
			return err
		}
		return renameInto(dir, tmp, name)
	})
	if err != nil {
		return err
	}
	// As a rename would: a layer kept after a commit that stopped later
	// must not share the file with the tree.
	if err := unix.Unlinkat(udir, uname, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unlink %s in the layer: %w", rel, err)
	}
	return nil
}

// testHookMove, when set, runs in a commit before it gives a file moved
// from the layer its mode, by the file's path in the layer: a test puts
// something else in its place there.
var testHookMove func(rel string)

// replaceFile writes the file rel of view (an upper directory) beside
// name in dir, made as who, and renames it over name as who.
func replaceFile(view *tree, rel string, dir int, name string, uid, gid, perm uint32, who Owner) error {
	src, err := view.open(rel)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := tempName(name)
	var fd int
	err = who.as(func() (err error) {
		fd, err = unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(fd), tmp)
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Chown(int(uid), int(gid))
	}
	if err == nil {
		err = unix.Fchmod(fd, perm)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		who.as(func() error { return unix.Unlinkat(dir, tmp, 0) })
		return err
	}
	return who.as(func() error { return renameInto(dir, tmp, name) })
}

// refuseKept fails a commit of changes to root that would reach a path of
// keep: one at or beneath it, or one that deletes or replaces (with what
// is not a directory) a directory holding it.
func refuseKept(root string, changes []Change, keep []string) error {
	for _, c := range changes {
		p := filepath.Join(root, c.Path)
		for _, k := range keep {
			inside := pathWithin(p, k)
			holds := pathWithin(k, p) && (c.Kind == Deleted || c.Type != "dir")
			if inside || holds {
				return fmt.Errorf("commit %s: the layer changes %s, which is the daemon's own (%s): discard the layer, or copy what you need out of it", root, p, k)
			}
		}
	}
	return nil
}

// pathWithin says whether the clean absolute path p is root or beneath it.
func pathWithin(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
