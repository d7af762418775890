package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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
// inside as the sandbox uid and gid.
type idmapKey struct{ owner, group, uid, gid uint32 }

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

// userns is an fd of a user namespace mapping k.owner to k.uid and
// k.group to k.gid, and nothing else.
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
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(k.owner), HostID: int(k.uid), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(k.group), HostID: int(k.gid), Size: 1}},
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

// idmapPlan decides, for a launch as uid:gid on set, which write roots are
// ID-mapped: those the sandbox uid could not write by their mode, only for
// a root caller (launcher.Spec.RootCaller), and only where this daemon can
// map them. notes has, for every such root, what its refusal should say if
// the sandbox finds it unusable after all.
func idmapPlan(writes []string, set MechanismSet, uid, gid uint32, rootCaller bool) (mapped []string, notes map[string]rootNote) {
	notes = map[string]rootNote{}
	setWhy, setRemedy := idmapShortfall(set)
	if setWhy == "" && !rootCaller {
		setWhy, setRemedy = "its owner is mapped to the sandbox uid for root callers only, whose sandboxes run as another uid", ""
	}
	for _, w := range usableRoots(writes) {
		var st unix.Stat_t
		if err := unix.Stat(w, &st); err != nil || st.Uid == uid || writableByMode(&st, uid, gid) {
			continue
		}
		switch {
		case setWhy != "":
			notes[w] = rootNote{why: setWhy, remedy: setRemedy}
		case coveredBy(w, hostTrees) || anyWithin(hostTrees, w):
			notes[w] = rootNote{
				why:     "it holds the host's own files, which mapping its owner to the sandbox uid would hand over",
				remedy:  "grant the workspace inside it, not the host's own tree",
				noChown: true,
			}
		default:
			mapped = append(mapped, w)
			notes[w] = rootNote{
				why:    fmt.Sprintf("it is ID-mapped, its owner shown as uid %d, and its mode does not let its owner write it", uid),
				remedy: "chmod u+wx " + w,
				// Handed to the sandbox uid, it would still be shut.
				noChown: true,
			}
		}
	}
	return mapped, notes
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
	need := uint32(0o2)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		need = 0o3
	}
	switch {
	case st.Uid == uid:
		return st.Mode>>6&need == need
	case st.Gid == gid:
		return st.Mode>>3&need == need
	}
	return st.Mode&need == need
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
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP) %s: %w", path, err)
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
