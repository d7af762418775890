package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"golang.org/x/sys/unix"
)

// hostTrees hold the host's own software, configuration and root's home.
// A write root that is one of them, inside one or above one (such as "/")
// is never ID-mapped: mapping root to the sandbox uid there would hand the
// sandbox the host itself, where a root caller meant a workspace.
var hostTrees = []string{"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/root", "/sbin", "/usr", "/var/lib"}

// idmapKey is one mapping: the host owner and group of write roots, shown
// inside as the sandbox uid and gid, and these as them; every other id is
// itself. Other ids must stay mapped: the kernel refuses every write to an
// inode whose owner or group the mount does not map.
type idmapKey struct{ owner, group, uid, gid uint32 }

// swapped is the ID map that is the identity but for a and b, which trade
// places.
func swapped(a, b uint32) []syscall.SysProcIDMap {
	// Every id but 2^32-1, which is none.
	const all = 1<<32 - 1
	lo, hi := int(min(a, b)), int(max(a, b))
	if lo == hi {
		return []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: all}}
	}
	var m []syscall.SysProcIDMap
	add := func(id, host, n int) {
		if n > 0 {
			m = append(m, syscall.SysProcIDMap{ContainerID: id, HostID: host, Size: n})
		}
	}
	add(0, 0, lo)
	add(lo, hi, 1)
	add(lo+1, lo+1, hi-lo-1)
	add(hi, lo, 1)
	add(hi+1, hi+1, all-hi-1)
	return m
}

// idmapper makes the user namespaces that ID-mapped write roots are
// mapped with, one per mapping, kept for the daemon's life: a namespace
// costs a process start, and few owners ever come up.
type idmapper struct {
	initPath string

	mu sync.Mutex
	ns map[idmapKey]int
}

func newIdmapper(initPath string) *idmapper {
	return &idmapper{initPath: initPath, ns: map[idmapKey]int{}}
}

// userns is an fd of a user namespace mapping k.owner and k.uid to each
// other, k.group and k.gid too, and every other id to itself.
func (m *idmapper) userns(k idmapKey) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fd, ok := m.ns[k]; ok {
		return fd, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, fmt.Errorf("pipe: %w", err)
	}
	defer w.Close()
	cmd := &exec.Cmd{
		Path:  m.initPath,
		Args:  []string{sandboxinit.UsernsArg0},
		Env:   []string{},
		Stdin: r,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: swapped(k.owner, k.uid),
			GidMappings: swapped(k.group, k.gid),
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return -1, fmt.Errorf("start a process in a user namespace mapping %d to %d: %w", k.owner, k.uid, err)
	}
	// The maps are written before Start returns; the process only has to
	// be alive while its namespace is opened.
	fd, err := unix.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	w.Close()
	cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("open the user namespace mapping %d to %d: %w", k.owner, k.uid, err)
	}
	m.ns[k] = fd
	return fd, nil
}

// rootNote is what a refusal of a write root the sandbox turned out unable
// to write says beyond its owner and mode: why it was not ID-mapped, or
// was and still is not writable, and what would help.
type rootNote struct {
	why, remedy string
	// noChown: handing the root to the sandbox uid is no remedy.
	noChown bool
}

// identity is who a launch's write roots may be mapped for: the sandbox's
// uid and gid, and what the caller itself may write.
type identity struct {
	uid, gid uint32
	// rootCaller: root started the session (launcher.Spec.RootCaller).
	rootCaller bool
	// groups are a non-root caller's (launcher.Spec.CallerGroups).
	groups []uint32
}

// idmapPlan decides, for a launch on set, which write roots are ID-mapped:
// those the sandbox uid could not write by their mode, and only where this
// daemon can map them. For a root caller a root's owner and group become
// the sandbox's; for another caller only a group of its own that may write
// the root becomes the sandbox's gid, giving back what dropping the
// caller's supplementary groups took. keys says how each is mapped; notes
// has, for every root considered, what its refusal should say if the
// sandbox finds it unusable after all.
func idmapPlan(writes []string, set MechanismSet, who identity) (mapped []string, keys map[string]idmapKey, notes map[string]rootNote) {
	keys, notes = map[string]idmapKey{}, map[string]rootNote{}
	setWhy, setRemedy := idmapShortfall(set)
	for _, w := range usableRoots(writes) {
		var st unix.Stat_t
		if err := unix.Stat(w, &st); err != nil || st.Uid == who.uid || writableByMode(&st, who.uid, who.gid) {
			continue
		}
		need := writeBits(&st)
		groupMay := slices.Contains(who.groups, st.Gid) && st.Mode>>3&need == need
		switch {
		case setWhy != "":
			notes[w] = rootNote{why: setWhy, remedy: setRemedy}
		case coveredBy(w, hostTrees) || anyWithin(hostTrees, w):
			notes[w] = rootNote{
				why:     "it holds the host's own files, which mapping its owner to the sandbox uid would hand over",
				remedy:  "grant the workspace inside it, not the host's own tree",
				noChown: true,
			}
		case who.rootCaller:
			mapped = append(mapped, w)
			keys[w] = idmapKey{owner: st.Uid, group: st.Gid, uid: who.uid, gid: who.gid}
			notes[w] = rootNote{
				why:    fmt.Sprintf("it is ID-mapped, its owner shown as uid %d, and its mode does not let its owner write it", who.uid),
				remedy: "chmod u+wx " + w,
				// Handed to the sandbox uid, it would still be shut.
				noChown: true,
			}
		case groupMay:
			mapped = append(mapped, w)
			keys[w] = idmapKey{owner: who.uid, group: st.Gid, uid: who.uid, gid: who.gid}
		default:
			notes[w] = rootNote{why: "the caller is not root and may not write it through a group of its own, so it is not mapped to the sandbox"}
		}
	}
	return mapped, keys, notes
}

// anyWithin reports whether one of paths is root or beneath it.
func anyWithin(paths []string, root string) bool {
	for _, p := range paths {
		if within(p, root) {
			return true
		}
	}
	return false
}

// writableByMode: the mode bits let uid (with gid and no supplementary
// group, as a root daemon's sandbox runs) create names in a directory or
// write a file. ACLs are not read: a root they open stays unmapped, and the
// init's own check has the last word.
func writableByMode(st *unix.Stat_t, uid, gid uint32) bool {
	need := writeBits(st)
	switch {
	case st.Uid == uid:
		return st.Mode>>6&need == need
	case st.Gid == gid:
		return st.Mode>>3&need == need
	}
	return st.Mode&need == need
}

// writeBits are the permission bits, of one class, that writing st takes:
// write, and search for a directory.
func writeBits(st *unix.Stat_t) uint32 {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return 0o3
	}
	return 0o2
}

// idmappedTree is a detached clone of the mount tree at path, its owner
// and group shown as the sandbox's through the namespace userns, nosuid and
// nodev. It refuses a path that crosses a symlink, as the policy checks
// did.
func idmappedTree(path string, userns int) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("open_tree %s: %w", path, err)
	}
	// Private, as every tree the daemon hands an init: a clone stays in
	// its source's peer group, and a carve-out the init mounts in it
	// would otherwise propagate to the host's mount of a shared tree.
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns), Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP) %s: %w", path, err)
	}
	return tree, nil
}

// refuseMappedHostTrees refuses a layer of the host's own tree that the
// daemon shows the sandbox through a mapping of its owner (an owner other
// than uid): as for a write root, that would hand the sandbox the host's
// files, root-only ones included, as its own.
func refuseMappedHostTrees(layers []string, uid uint32) error {
	for _, l := range layers {
		var st unix.Stat_t
		if unix.Stat(l, &st) != nil || st.Uid == uid || !(coveredBy(l, hostTrees) || anyWithin(hostTrees, l)) {
			continue
		}
		return &launcher.Unenforceable{
			Field: "filesystem.layer", Mechanism: fmt.Sprintf("a layer of %s showing its owner (uid %d) as the sandbox's uid %d", l, st.Uid, uid),
			Found:  l + " holds the host's own files, which mapping its owner to the sandbox uid would hand over",
			Remedy: "layer the workspace inside it, not the host's own tree",
		}
	}
	return nil
}

// cloneTree is a detached clone of the mount whose root is root, nosuid
// and nodev, for the init to attach where the plan says: a layer's
// overlay, which the daemon holds detached, in no mount table.
func cloneTree(root *os.File) (int, error) {
	tree, err := unix.OpenTree(int(root.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("open_tree %s: %w", root.Name(), err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("mount_setattr %s: %w", root.Name(), err)
	}
	return tree, nil
}

// idmapRefusal is the refusal of a write root that had to be ID-mapped to
// be writable by the sandbox uid and could not be: its filesystem (NFS,
// FUSE, ...) or the kernel (before 5.12) does not map owners.
func idmapRefusal(w string, uid, gid uint32, err error) *launcher.Unenforceable {
	desc, owner, _ := hostOwner(w)
	var errno syscall.Errno
	errors.As(err, &errno)
	why, remedy := "its filesystem cannot map owners (as NFS, FUSE or ramfs cannot)", "put the workspace on a filesystem that supports ID-mapped mounts (ext4, xfs, btrfs, tmpfs on Linux 6.3+, overlayfs)"
	switch errno {
	case syscall.ENOSYS:
		why, remedy = "the kernel has no ID-mapped mounts", "run on Linux 5.12 or later"
	case syscall.EPERM:
		why, remedy = "the daemon may not map its owners (it is not root of the host's user namespace)", "run sandboxd as root on the host"
	}
	return &launcher.Unenforceable{
		Field:     "filesystem.write",
		Mechanism: fmt.Sprintf("write access to %s for the sandbox uid %d: an ID-mapped bind showing its owner as that uid", w, uid),
		Found:     fmt.Sprintf("%s (%s) is not writable by uid %d, and ID-mapped mounts do not work for it: %s", w, desc, uid, why),
		Probe:     "open_tree + mount_setattr(MOUNT_ATTR_IDMAP) " + w,
		Errno:     errno,
		Remedy:    joinRemedies(identityRemedies(w, owner, uid, gid, false, true), remedy),
	}
}
