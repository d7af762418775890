package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// stepError is a failed setup step; the init reports it to the daemon, which
// turns it into an Unenforceable naming the policy field.
type stepError struct {
	Field string
	Op    string
	Path  string
	Err   error
}

func (e *stepError) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err) }

const (
	baseDir    = "/tmp"
	oldRootDir = "/oldroot"
	newRootDir = "/newroot"
	maskFile   = "/mask"
)

// rootBuilder builds the sandbox root with the file-descriptor based mount
// API: every source and target is opened with openat2 first, so a symlink
// swapped in by someone else cannot redirect a mount outside the new root.
type rootBuilder struct {
	oldRoot int
	newRoot int
	// uncreatable are placeholders the init could not create for lack of
	// permission. The command has strictly fewer rights than the init, so it
	// cannot create them either: there is nothing to protect there.
	uncreatable map[string]bool
	// mapped are the daemon's ID-mapped write roots by host path, detached
	// until their bind step attaches them.
	mapped map[string]int
	// files counts the MountFile steps applied, to name their files.
	files int
}

func openIn(root int, name string, resolve uint64) (int, error) {
	rel := strings.TrimPrefix(path.Clean(name), "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve})
}

const (
	inRoot       = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
	noSymlinks   = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS
	attrReadOnly = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
)

// setupRoot builds the sandbox's root from plan steps and pivots into it.
func setupRoot(steps []MountStep) error {
	fail := func(op, path string, err error) error {
		return &stepError{Field: "process", Op: op, Path: path, Err: err}
	}
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fail("make-rslave", "/", err)
	}
	if err := unix.Mount("tmpfs", baseDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fail("mount tmpfs", baseDir, err)
	}
	for _, d := range []string{oldRootDir, newRootDir} {
		if err := os.Mkdir(baseDir+d, 0o700); err != nil {
			return fail("mkdir", d, err)
		}
	}
	if err := unix.PivotRoot(baseDir, baseDir+oldRootDir); err != nil {
		return fail("pivot_root", baseDir, err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("chdir", "/", err)
	}
	if err := os.WriteFile(maskFile, nil, 0); err != nil {
		return fail("create", maskFile, err)
	}
	old, err := unix.Open(oldRootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open", oldRootDir, err)
	}
	b := &rootBuilder{oldRoot: old, newRoot: -1, uncreatable: map[string]bool{}, mapped: map[string]int{}}
	defer func() {
		for _, fd := range b.mapped {
			unix.Close(fd)
		}
	}()
	// All of them first: placeholders, which come before the binds, may
	// need them.
	for _, s := range steps {
		if s.Idmapped {
			fds, err := receiveFds(PassMount, 1)
			if err != nil {
				return &stepError{Field: s.Field, Op: "receive ID-mapped mount", Path: s.Source, Err: err}
			}
			b.mapped[s.Source] = fds[0]
		}
	}
	for _, s := range steps {
		if err := b.apply(s); err != nil {
			var se *stepError
			if errors.As(err, &se) {
				return err
			}
			path := s.Target
			if path == "" {
				path = s.Source
			}
			return &stepError{Field: s.Field, Op: string(s.Kind), Path: path, Err: err}
		}
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; the lazy
	// unmount then drops it and with it every host mount we did not clone.
	nr, err := unix.Open(newRootDir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open", newRootDir, err)
	}
	if err := unix.Fchdir(nr); err != nil {
		return fail("fchdir", newRootDir, err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fail("pivot_root", newRootDir, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fail("umount", "old root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("chdir", "/", err)
	}
	// The clones are still slaves of the host's mounts: a device the host
	// mounts later would appear inside, writable. Cut them off.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make-rprivate", "/", err)
	}
	unix.Close(nr)
	unix.Close(old)
	if b.newRoot >= 0 {
		unix.Close(b.newRoot)
	}
	return nil
}

func (b *rootBuilder) apply(s MountStep) error {
	if s.Kind == MountRootReadOnly {
		return b.rootReadOnly(s)
	}
	if b.newRoot < 0 {
		return errors.New("plan does not start with the root mount")
	}
	if b.uncreatable[s.Target] {
		return nil
	}
	switch s.Kind {
	case MountPlaceholder:
		if s.Via != "" {
			// The init has no more right through the mapping than the
			// command will: what it cannot make, neither can the command.
			err := mkdirAllNoSymlinks(b.mapped[s.Via], strings.TrimPrefix(s.Source, s.Via))
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				b.uncreatable[s.Source] = true
				return nil
			}
			return err
		}
		err := mkdirAllNoSymlinks(b.oldRoot, s.Source)
		if (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && b.unreachable(s.Source) {
			b.uncreatable[s.Source] = true
			return nil
		}
		return err
	case MountSymlink:
		return unix.Symlink(s.Source, newRootDir+s.Target)
	}
	target, err := b.target(s)
	if err != nil {
		if s.Optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.EACCES) && protects(s) && b.unreachable(s.Target) {
			return nil
		}
		return fmt.Errorf("open target: %w", err)
	}
	defer unix.Close(target)
	switch s.Kind {
	case MountBind, MountDevice:
		if s.Idmapped {
			// NOSUID and NODEV were set with the mapping.
			if err := unix.MoveMount(b.mapped[s.Source], "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
				return fmt.Errorf("move_mount of the ID-mapped clone: %w", err)
			}
			return nil
		}
		src, err := openIn(b.oldRoot, s.Source, noSymlinks)
		if err != nil {
			return fmt.Errorf("open source: %w", err)
		}
		defer unix.Close(src)
		// Writable is not a way to run setuid programs or reach devices.
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if s.Kind == MountDevice {
			attr = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC
		}
		if err := attachClone(src, target, attr); err != nil {
			return err
		}
		if s.Target == "/" {
			// Lookups from a directory fd do not cross a mount stacked on
			// that directory itself: later steps must start from the new top.
			return b.reopenNewRoot()
		}
		return nil
	case MountRebindReadOnly:
		return attachClone(target, target, attrReadOnly)
	case MountPin:
		return attachClone(target, target, 0)
	case MountFile:
		// In the init's tmpfs, which the sandbox never sees but through
		// this read-only bind.
		name := fmt.Sprintf("/file-%d", b.files)
		b.files++
		if err := os.WriteFile(name, []byte(s.Content), 0o644); err != nil {
			return err
		}
		src, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(src)
		return attachClone(src, target, attrReadOnly|unix.MOUNT_ATTR_NOEXEC)
	case MountMaskFile:
		src, err := unix.Open(maskFile, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(src)
		return attachClone(src, target, attrReadOnly|unix.MOUNT_ATTR_NOEXEC)
	case MountTmpfs:
		attr := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
		opts := map[string]string{"mode": fmt.Sprintf("%o", s.Mode)}
		if s.ReadOnly {
			attr |= unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC
			opts["size"] = "4k"
		}
		return attachNew("tmpfs", opts, attr, target)
	case MountProc:
		return attachNew("proc", nil, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, target)
	case MountDevpts:
		return attachNew("devpts", map[string]string{"newinstance": "", "ptmxmode": "0666", "mode": "0620"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, target)
	}
	return fmt.Errorf("unknown mount step %q", s.Kind)
}

func (b *rootBuilder) rootReadOnly(s MountStep) error {
	src, err := openIn(b.oldRoot, s.Source, noSymlinks)
	if err != nil {
		return fmt.Errorf("open source: %w", err)
	}
	defer unix.Close(src)
	dst, err := unix.Open(newRootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	if err := attachClone(src, dst, attrReadOnly); err != nil {
		return err
	}
	return b.reopenNewRoot()
}

func (b *rootBuilder) reopenNewRoot() error {
	fd, err := unix.Open(newRootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", newRootDir, err)
	}
	if b.newRoot >= 0 {
		unix.Close(b.newRoot)
	}
	b.newRoot = fd
	return nil
}

// target opens the mount point inside the new root, creating it when it is
// missing and its parent is a tmpfs of ours (for example a write root under
// the private /tmp).
func (b *rootBuilder) target(s MountStep) (int, error) {
	resolve := uint64(inRoot)
	if policyPath(s) {
		// The daemon checked these paths for symlinks; refusing them here
		// again closes the window in which one could be swapped in.
		resolve = noSymlinks
	}
	fd, err := openIn(b.newRoot, s.Target, resolve)
	if err == nil || !errors.Is(err, unix.ENOENT) || s.Optional {
		return fd, err
	}
	dir := true
	if s.Kind == MountBind || s.Kind == MountDevice {
		var st unix.Stat_t
		if err := unix.Stat(oldRootDir+s.Source, &st); err != nil {
			return -1, err
		}
		dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	// Missing parents can only be made in a tmpfs of ours; in the read-only
	// clone of the host this fails with EROFS, as it should.
	if err := os.MkdirAll(newRootDir+path.Dir(s.Target), 0o755); err != nil {
		return -1, fmt.Errorf("create mount point parents: %w", err)
	}
	parent, err := openIn(b.newRoot, path.Dir(s.Target), resolve)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	pdir, err := unix.Openat(parent, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pdir)
	base := path.Base(s.Target)
	if dir {
		err = unix.Mkdirat(pdir, base, 0o755)
	} else {
		var f int
		f, err = unix.Openat(pdir, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(f)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("create mount point: %w", err)
	}
	if policyPath(s) {
		return openIn(b.newRoot, s.Target, resolve)
	}
	return openIn(b.newRoot, s.Target, inRoot)
}

// policyPath reports steps whose target a policy named (or an ancestor of
// one); system paths such as /dev/ptmx may be symlinks, these may not.
func policyPath(s MountStep) bool {
	return strings.HasPrefix(s.Field, "filesystem.")
}

// protects reports steps that only take access away: when their target is
// out of the sandbox's reach, skipping them changes nothing.
func protects(s MountStep) bool {
	return s.Field == "filesystem.deny" || s.Field == "filesystem.read_only" || s.Kind == MountMaskFile
}

// unreachable reports whether the command can never reach path: walking
// down, the first directory that refuses to be searched (or, for a path not
// there yet, the directory it would be made in) does not belong to the
// sandbox uid, whose owner could chmod it open. The init failing alone says
// nothing: its capabilities do not cover a directory of the sandbox uid with
// a group outside the user namespace.
func (b *rootBuilder) unreachable(name string) bool {
	uid := uint32(os.Getuid())
	if uid == b.overflowUID() {
		// Every unmapped owner shows as our own uid: ownership says nothing.
		return false
	}
	var parent unix.Stat_t
	if err := unix.Fstat(b.oldRoot, &parent); err != nil {
		return false
	}
	p := ""
	for _, c := range strings.Split(strings.Trim(name, "/"), "/") {
		p = path.Join(p, c)
		var st unix.Stat_t
		err := unix.Fstatat(b.oldRoot, p, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOENT) {
			return parent.Uid != uid
		}
		if err != nil {
			return false
		}
		parent = st
	}
	return false
}

// overflowUID is the uid the kernel shows for owners a user namespace does
// not map.
func (b *rootBuilder) overflowUID() uint32 {
	data, err := os.ReadFile(oldRootDir + "/proc/sys/kernel/overflowuid")
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
}

// attachClone clones the mount tree at src (recursively), applies attr to
// every mount of the clone, and attaches it on top of dst.
func attachClone(src, dst int, attr uint64) error {
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if attr != 0 {
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			return fmt.Errorf("mount_setattr: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

func attachNew(fstype string, opts map[string]string, attr int, dst int) error {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fs)
	for k, v := range opts {
		if v == "" {
			err = unix.FsconfigSetFlag(fs, k)
		} else {
			err = unix.FsconfigSetString(fs, k, v)
		}
		if err != nil {
			return fmt.Errorf("fsconfig %s %s=%s: %w", fstype, k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("fsconfig create %s: %w", fstype, err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return fmt.Errorf("fsmount %s: %w", fstype, err)
	}
	defer unix.Close(m)
	if err := unix.MoveMount(m, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %s: %w", fstype, err)
	}
	return nil
}

// mkdirAllNoSymlinks creates path beneath root, refusing to walk through any
// symlink so a racing rename cannot make us create directories elsewhere.
func mkdirAllNoSymlinks(root int, path string) error {
	dir, err := unix.Openat(root, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for _, c := range strings.Split(strings.Trim(path, "/"), "/") {
		next, err := unix.Openat(dir, c, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(dir, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(dir)
				return fmt.Errorf("mkdir %s: %w", c, err)
			}
			next, err = unix.Openat(dir, c, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		unix.Close(dir)
		if err != nil {
			return fmt.Errorf("open %s: %w", c, err)
		}
		dir = next
	}
	return unix.Close(dir)
}
