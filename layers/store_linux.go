//go:build linux

package layers

import (
	"crypto/rand"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/sys/mountinfo"
	storage "go.podman.io/storage"
	drivers "go.podman.io/storage/drivers"
	"go.podman.io/storage/pkg/idmap"
	"go.podman.io/storage/pkg/idtools"
	"golang.org/x/sys/unix"
)

// overlayOff are the overlay features turned off so that the upper
// directories stay plain: without redirects a renamed directory is a
// deletion and an addition, without metacopy a copied-up file holds its
// data, and without an index nothing outside the upper directory records
// the layer. A review reads them as that.
var overlayOff = []string{"redirect_dir", "metacopy", "index"}

// Store is the daemon's layers: the storage library's overlay driver
// under a directory of the daemon's state, plus a record of each layer's
// session and a manifest of its path as it was when the layer was made.
//
// The overlays are detached mounts (fsmount), never attached to the
// daemon's mount table: a change there would make the backend drop the
// sandbox inits it started ahead, and a daemon that dies leaves none
// behind, as the kernel frees them with its file descriptors.
type Store struct {
	dir string
	st  storage.Store
	drv drivers.Driver

	mu sync.Mutex
	// mounted are the roots of the overlays of layers a session runs on.
	mounted map[string]*os.File
}

// record is what the store keeps beside the storage library's own
// metadata of a layer.
type record struct {
	Info
	// Ready is set once the layer is whole; a layer without it is what
	// a daemon that died while making it left.
	Ready bool `json:"ready"`
	// Manifest names the layer whose manifest holds the path as it was
	// when the bottom layer of the chain was made.
	Manifest string `json:"manifest"`
	// Dev and Ino are the directory the layer was made of, and PathUID
	// and PathGID its owner and group then: a diff or commit refuses a
	// path that is no longer it (openPath).
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	PathUID uint32 `json:"path_uid"`
	PathGID uint32 `json:"path_gid"`
	// Creds are the session's owner's ids, which a commit writes the
	// path with; nil in a record of an earlier daemon.
	Creds *Owner `json:"creds,omitempty"`
}

// Open opens (making it if needed) the store in dir. The layers a daemon
// that died had not finished are removed first; cleaned says which.
func Open(dir string) (s *Store, cleaned []string, err error) {
	if os.Geteuid() != 0 {
		return nil, nil, fmt.Errorf("%w: only a root daemon can mount overlay in the host's mount namespace", ErrUnsupported)
	}
	// Not searchable by others: the layers hold what sandboxes wrote,
	// which another sandbox must not read through the store.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("layer store %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("layer store %s: %w", dir, err)
	}
	graphRoot := filepath.Join(dir, "storage")
	cleaned, err = removeProbeLeftovers(filepath.Join(graphRoot, "overlay"))
	if err != nil {
		return nil, cleaned, fmt.Errorf("layer store %s: %w", dir, err)
	}
	st, err := storage.GetStore(storage.StoreOptions{
		RunRoot:         filepath.Join(dir, "run"),
		GraphRoot:       graphRoot,
		GraphDriverName: "overlay",
		// The driver's own bind of its directory would be one more
		// mount for a dead daemon to leave behind; the daemon's state
		// directory needs no propagation of its own.
		GraphDriverOptions: []string{"overlay.skip_mount_home=true", "overlay.mountopt=nodev"},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("layer store %s: %w", dir, err)
	}
	drv, err := st.GraphDriver()
	if err != nil {
		st.Shutdown(true)
		return nil, nil, fmt.Errorf("layer store %s: %w", dir, err)
	}
	s = &Store{dir: dir, st: st, drv: drv, mounted: map[string]*os.File{}}
	if err := os.MkdirAll(s.manifests(), 0o700); err != nil {
		st.Shutdown(true)
		return nil, nil, fmt.Errorf("layer store %s: %w", dir, err)
	}
	removed, err := s.removeUnfinished()
	if err != nil {
		st.Shutdown(true)
		return nil, nil, err
	}
	return s, append(cleaned, removed...), nil
}

func (s *Store) manifests() string { return filepath.Join(s.dir, "manifests") }

// probePrefixes name the directories the storage library's overlay driver
// makes in its home to probe the kernel's overlay the first time it starts
// there (drivers/overlay: supportsOverlay, doesSupportNativeDiff and the
// like). It mounts a test overlay in each and unmounts and removes it in
// deferred calls, which a daemon killed meanwhile never runs.
var probePrefixes = []string{"compat", "opaque-bug-check", "metacopy-check", "volatile-check"}

// removeProbeLeftovers unmounts whatever is mounted beneath home, the
// overlay driver's directory, and removes the probe directories there.
// The store's own overlays are detached and die with the daemon's file
// descriptors: a mount attached beneath home can only be a probe's that a
// daemon killed while probing left in the host's mount table, where
// nothing else would ever unmount it.
func removeProbeLeftovers(home string) ([]string, error) {
	// The mount table has the paths with their links resolved.
	home, err := filepath.EvalSymlinks(home)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("overlay driver directory: %w", err)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(home))
	if err != nil {
		return nil, fmt.Errorf("mounts beneath %s: %w", home, err)
	}
	var out []string
	// Last mounted first: a probe's overlay over its ID-mapped lower goes
	// before that lower, and stacked mounts one by one.
	for _, m := range slices.Backward(mounts) {
		if m.Mountpoint == home {
			continue
		}
		if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return out, fmt.Errorf("unmount %s, left by a daemon that died: %w", m.Mountpoint, err)
		}
		out = append(out, "mount "+m.Mountpoint)
	}
	names, err := os.ReadDir(home)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return out, fmt.Errorf("overlay driver directory: %w", err)
	}
	for _, n := range names {
		if !n.IsDir() || !slices.ContainsFunc(probePrefixes, func(p string) bool { return strings.HasPrefix(n.Name(), p) }) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(home, n.Name())); err != nil {
			return out, fmt.Errorf("overlay probe directory, left by a daemon that died: %w", err)
		}
		out = append(out, "overlay probe directory "+filepath.Join(home, n.Name()))
	}
	return out, nil
}

// removeUnfinished deletes the layers a daemon died making, and
// manifests no layer refers to.
func (s *Store) removeUnfinished() ([]string, error) {
	all, err := s.st.Layers()
	if err != nil {
		return nil, fmt.Errorf("layer store: list: %w", err)
	}
	var out []string
	used := map[string]bool{}
	for _, l := range all {
		r, ok := parseRecord(l.Metadata)
		if ok && r.Ready {
			used[r.Manifest] = true
			continue
		}
		if err := s.st.DeleteLayer(l.ID); err != nil {
			return out, fmt.Errorf("layer store: remove unfinished layer %s: %w", l.ID, err)
		}
		out = append(out, "unfinished layer "+l.ID)
	}
	names, err := os.ReadDir(s.manifests())
	if err != nil {
		return out, fmt.Errorf("layer store: %w", err)
	}
	for _, n := range names {
		if !used[n.Name()] {
			os.Remove(filepath.Join(s.manifests(), n.Name()))
		}
	}
	return out, nil
}

func parseRecord(meta string) (record, bool) {
	var r record
	if meta == "" || json.Unmarshal([]byte(meta), &r) != nil {
		return r, false
	}
	return r, true
}

// Close lets go of the overlays the store mounted; the layers stay.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, m := range s.mounted {
		m.Close()
		delete(s.mounted, id)
	}
	_, err := s.st.Shutdown(true)
	return err
}

// pin opens path, a clean absolute path, as a directory without following
// a symlink anywhere on the way (openat2 with RESOLVE_NO_SYMLINKS, from
// "/"): the daemon mounts, reads and writes the layered path through the
// descriptor, so that nothing put in the place of the path or of a
// directory above it later leads it elsewhere. Every kernel whose overlay
// takes lowerdir+ (6.8) has openat2 (5.6).
func pin(path string) (*tree, unix.Stat_t, error) {
	var st unix.Stat_t
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, st, fmt.Errorf("layer %s: not a clean absolute path: %w", path, ErrBadPath)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, st, fmt.Errorf("layer %s crosses a symlink; name the real path: %w", path, ErrBadPath)
	case errors.Is(err, unix.ENOTDIR):
		return nil, st, fmt.Errorf("layer %s: not a directory, or beneath one that is not: %w", path, ErrBadPath)
	case errors.Is(err, unix.ENOENT):
		return nil, st, fmt.Errorf("layer %s: %w: %w", path, err, ErrBadPath)
	case err != nil:
		return nil, st, fmt.Errorf("layer %s: %w", path, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, fmt.Errorf("layer %s: %w", path, err)
	}
	return &tree{root: path, fd: fd}, st, nil
}

// openPath reopens r's path as pin does, and refuses it unless it is the
// directory the layer was made of (device and inode) with the owner and
// group it had then.
func (r record) openPath() (*tree, error) {
	if r.Ino == 0 {
		return nil, fmt.Errorf("layer of %s records no directory it was made of (an earlier daemon made it); discard it: %w", r.Path, ErrPathChanged)
	}
	t, st, err := pin(r.Path)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: it, or a directory above it, was moved or replaced since the layer was made (%w); put it back as it was, or discard the layer: %w", r.Path, err, ErrPathChanged)
	}
	why := ""
	switch {
	case st.Dev != r.Dev || st.Ino != r.Ino:
		why = "it is another directory than the one the layer was made of: it, or a directory above it, was moved or replaced since"
	case st.Uid != r.PathUID || st.Gid != r.PathGID:
		why = fmt.Sprintf("its owner and group are %d:%d, not %d:%d as when the layer was made", st.Uid, st.Gid, r.PathUID, r.PathGID)
	default:
		return t, nil
	}
	t.close()
	return nil, fmt.Errorf("layer of %s: %s; put it back as it was, or discard the layer: %w", r.Path, why, ErrPathChanged)
}

// testHookPinned, when set, runs in Create once the path is pinned: a
// test puts another directory in the path's place there.
var testHookPinned func()

// Create makes the layer of path for session, on top of the layer of
// path of parentSession when that is set, and mounts it; merged is the
// root of the mount the session is to see in path's place, which the
// store keeps open until Release. A path sb's uid does not own is shown
// to it through an ID-mapped mount (see IDMap). A commit of the layer
// writes the path with owner's ids (see Owner).
func (s *Store) Create(session, path, parentSession string, owner Owner, sb Sandbox) (info Info, merged *os.File, err error) {
	base, pst, err := pin(path)
	if err != nil {
		return Info{}, nil, err
	}
	defer base.close()
	if testHookPinned != nil {
		testHookPinned()
	}
	if pst.Mode&unix.S_IFMT != unix.S_IFDIR {
		return Info{}, nil, fmt.Errorf("layer %s: not a directory: %w", path, ErrBadPath)
	}
	if sb.OwnPathsOnly && pst.Uid != owner.UID {
		return Info{}, nil, fmt.Errorf("layer %s is owned by uid %d, not by the session's owner (uid %d): only root may layer another's directory: %w", path, pst.Uid, owner.UID, ErrNotOwner)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := record{
		Info: Info{Session: session, Path: path, ParentSession: parentSession, Owner: owner.UID, Created: time.Now().UTC()},
		Dev:  pst.Dev, Ino: pst.Ino, PathUID: pst.Uid, PathGID: pst.Gid,
		Creds: &Owner{UID: owner.UID, GID: owner.GID, Groups: slices.Clone(owner.Groups)},
	}
	parentID := ""
	if parentSession != "" {
		p, err := s.find(parentSession, path)
		if err != nil {
			return Info{}, nil, err
		}
		if _, busy := s.mounted[p.ID]; busy {
			return Info{}, nil, fmt.Errorf("session %s still runs on its layer of %s; start on it once it has ended: %w", parentSession, path, ErrBusy)
		}
		if p.Dev != rec.Dev || p.Ino != rec.Ino || p.PathUID != rec.PathUID || p.PathGID != rec.PathGID {
			return Info{}, nil, fmt.Errorf("layer of %s: it is not the directory, or has not the owner, session %s's layer was made of: %w", path, parentSession, ErrPathChanged)
		}
		parentID, rec.Manifest = p.ID, p.Manifest
	}
	// Volatile: the library records the layer without fsync, which on
	// a launch's path costs more than the rest of making the layer. A
	// daemon that dies loses nothing by it; a host that crashes may lose
	// the record of layers made since its last sync, and with it those
	// layers.
	l, err := s.st.CreateLayer("", parentID, nil, "", true, &storage.LayerOptions{Volatile: true})
	if err != nil {
		return Info{}, nil, fmt.Errorf("layer of %s: create: %w", path, err)
	}
	rec.ID = l.ID
	defer func() {
		if err != nil {
			if merged != nil {
				merged.Close()
			}
			s.st.DeleteLayer(l.ID)
			if rec.Manifest == l.ID {
				os.Remove(filepath.Join(s.manifests(), l.ID))
			}
		}
	}()
	// The record is written once the layer is whole: a layer without one
	// is what a daemon that died while making it left (removeUnfinished).
	md, err := s.drv.Metadata(l.ID)
	if err != nil {
		return Info{}, nil, fmt.Errorf("layer of %s: %w", path, err)
	}
	var m *IDMap
	if pst.Uid != sb.UID {
		m = &IDMap{Owner: pst.Uid, Group: pst.Gid, UID: sb.UID, GID: sb.GID}
	}
	// The merged directory's root is the upper one's: it must look like
	// the path it stands for.
	uid, gid := pst.Uid, pst.Gid
	if m != nil {
		uid, gid = m.UID, m.GID
	}
	if err = os.Chown(md["UpperDir"], int(uid), int(gid)); err == nil {
		err = unix.Chmod(md["UpperDir"], pst.Mode&0o7777)
	}
	if err != nil {
		return Info{}, nil, fmt.Errorf("layer of %s: upper directory: %w", path, err)
	}
	if rec.Manifest == "" {
		rec.Manifest = l.ID
		if err = writeManifest(filepath.Join(s.manifests(), l.ID), base); err != nil {
			return Info{}, nil, err
		}
	}
	lower := base
	if m != nil {
		// Overlay cannot be ID-mapped itself, but its layers can: the
		// path is, beneath it.
		if lower, err = mapped(base, m); err != nil {
			return Info{}, nil, err
		}
		defer lower.close()
	}
	if merged, err = mountOverlay(splitLowers(md["LowerDir"]), lower, m != nil, md["UpperDir"], md["WorkDir"]); err != nil {
		return Info{}, nil, err
	}
	rec.Ready = true
	if err = s.setRecord(rec); err != nil {
		return Info{}, nil, err
	}
	s.mounted[l.ID] = merged
	return rec.Info, merged, nil
}

func splitLowers(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ":")
}

// ovlMaxStack is the most lower layers an overlay takes (the kernel's
// OVL_MAX_STACK).
const ovlMaxStack = 500

// mountOverlay makes a detached overlay of the layers lowers (top first)
// over the layered path, lower, with upper, or read-only without one, and
// returns its root. The overlay takes lower by its descriptor, which is
// the path itself or, when clone, a detached mount of it (ID-mapped).
func mountOverlay(lowers []string, lower *tree, clone bool, upper, work string) (*os.File, error) {
	path := lower.root
	// Overlay takes at most ovlMaxStack lower layers and refuses one more
	// at lowerdir+ with the EINVAL a kernel without lowerdir+ gives.
	if len(lowers)+1 > ovlMaxStack {
		return nil, fmt.Errorf("overlay of %s: %d layers over it, more than overlay takes (%d)", path, len(lowers), ovlMaxStack-1)
	}
	fail := func(op string, err error) (*os.File, error) {
		return nil, overlayErr(path, op, err, false)
	}
	// EINVAL from these is a kernel without overlay's lowerdir+ or the
	// options the store turns off.
	failOption := func(op string, err error) (*os.File, error) {
		return nil, overlayErr(path, op, err, true)
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return failOption("fsopen", err)
	}
	defer unix.Close(fsfd)
	for _, l := range lowers {
		if err := unix.FsconfigSetString(fsfd, "lowerdir+", l); err != nil {
			return failOption("lowerdir+ "+l, err)
		}
	}
	if clone {
		err = unix.FsconfigSetFd(fsfd, "lowerdir+", lower.fd)
	} else {
		// Overlay takes an O_PATH descriptor by the name of its link
		// in /proc on every kernel that has lowerdir+; by the
		// descriptor itself only since 6.13.
		err = unix.FsconfigSetString(fsfd, "lowerdir+", fmt.Sprintf("/proc/self/fd/%d", lower.fd))
	}
	if err != nil {
		return failOption("lowerdir+ "+path, err)
	}
	attr := unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID
	if upper != "" {
		if err := unix.FsconfigSetString(fsfd, "upperdir", upper); err != nil {
			return fail("upperdir", err)
		}
		if err := unix.FsconfigSetString(fsfd, "workdir", work); err != nil {
			return fail("workdir", err)
		}
	} else {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	for _, o := range overlayOff {
		if err := unix.FsconfigSetString(fsfd, o, "off"); err != nil {
			return failOption(o+"=off", err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fail("create", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return fail("fsmount", err)
	}
	return os.NewFile(uintptr(mfd), "overlay of "+path), nil
}

// overlayErr is the failure of op in making an overlay of path: an
// Unsupported error where the kernel has no overlay, or (EINVAL from op,
// an option, when option) not the features or options the store uses;
// any other cause (a full disk, no memory or file descriptors left, a
// directory gone, or EINVAL from the mount's creation: overlays stacked
// too deep, the upper and work directories on different mounts) is not
// that, and is only wrapped.
func overlayErr(path, op string, err error, option bool) error {
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || option && errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: overlay of %s: %s: %w", ErrUnsupported, path, op, err)
	}
	return fmt.Errorf("overlay of %s: %s: %w", path, op, err)
}

func (s *Store) setRecord(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.st.SetMetadata(r.ID, string(b)); err != nil {
		return fmt.Errorf("layer %s: record: %w", r.ID, err)
	}
	return nil
}

// records are the whole layers, with their storage layers' parents.
func (s *Store) records() ([]record, map[string]string, error) {
	all, err := s.st.Layers()
	if err != nil {
		return nil, nil, fmt.Errorf("layer store: list: %w", err)
	}
	var out []record
	parents := map[string]string{}
	for _, l := range all {
		if r, ok := parseRecord(l.Metadata); ok && r.Ready {
			r.ID = l.ID
			out = append(out, r)
			parents[l.ID] = l.Parent
		}
	}
	slices.SortFunc(out, func(a, b record) int { return a.Created.Compare(b.Created) })
	return out, parents, nil
}

func (s *Store) find(session, path string) (record, error) {
	recs, _, err := s.records()
	if err != nil {
		return record{}, err
	}
	for _, r := range recs {
		if r.Session == session && r.Path == path {
			return r, nil
		}
	}
	return record{}, fmt.Errorf("session %s has no layer of %s: %w", session, path, ErrNotFound)
}

// Of lists session's layers.
func (s *Store) Of(session string) ([]Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.of(session)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(recs))
	for i, r := range recs {
		out[i] = r.Info
	}
	return out, nil
}

func (s *Store) of(session string) ([]record, error) {
	recs, _, err := s.records()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r record) bool { return r.Session != session }), nil
}

// List is every layer, oldest first, with its size.
func (s *Store) List() ([]Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, _, err := s.records()
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		r.Size, _ = s.size(r.ID)
		out = append(out, r.Info)
	}
	return out, nil
}

// Size is what the layer id holds: the bytes of its files and links.
func (s *Store) Size(id string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size(id)
}

func (s *Store) size(id string) (int64, error) {
	md, err := s.drv.Metadata(id)
	if err != nil {
		return 0, err
	}
	var n int64
	err = walkUpper(md["UpperDir"], func(_ string, st *unix.Stat_t, _ int) error {
		if t := st.Mode & unix.S_IFMT; t == unix.S_IFREG || t == unix.S_IFLNK {
			n += st.Size
		}
		return nil
	})
	return n, err
}

// testHookWalk, when set, runs in walkUpper before it opens the directory
// rel beneath the upper directory: a test puts a symlink in its place.
var testHookWalk func(rel string)

// walkUpper calls fn with every entry beneath the upper directory up, a
// directory before what it holds, with its status and, for a directory,
// a descriptor of it. The walk goes down from up's descriptor, opening
// each directory from its parent's without following a symlink or
// crossing a mount: a sandbox writes the upper directory while it runs,
// and a directory it replaced by a symlink between the listing and the
// descent must not lead the daemon, which reads as root, elsewhere. An
// entry gone meanwhile is left out. A path longer than PATH_MAX fails
// the walk with errTooLong: the daemon reaches what the walk finds by
// name later, which the kernel refuses beyond it, and the walk holds a
// descriptor for each directory it is in (a sandbox can nest 100,000).
func walkUpper(up string, fn func(rel string, st *unix.Stat_t, dir int) error) error {
	fd, err := unix.Open(up, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", up, err)
	}
	var rel []byte
	if err := walkDir(fd, &rel, fn); err != nil {
		return fmt.Errorf("read %s: %w", up, err)
	}
	return nil
}

var errTooLong = fmt.Errorf("a path in the layer is longer than PATH_MAX (%d bytes), which the daemon does not read", unix.PathMax)

// walkDir walks the directory dir for walkUpper, and closes it. rel is
// dir's path beneath the top, which every level shares and extends in
// turn.
func walkDir(dir int, rel *[]byte, fn func(string, *unix.Stat_t, int) error) error {
	f := os.NewFile(uintptr(dir), "upper directory")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if errors.Is(err, unix.ENOENT) {
		// Removed since it was opened: it holds nothing now.
		return nil
	}
	if err != nil {
		return err
	}
	at := len(*rel)
	defer func() { *rel = (*rel)[:at] }()
	for _, n := range names {
		*rel = (*rel)[:at]
		if at > 0 {
			*rel = append(*rel, '/')
		}
		*rel = append(*rel, n...)
		if len(*rel) >= unix.PathMax {
			return fmt.Errorf("%.100s...: %w", *rel, errTooLong)
		}
		p := string(*rel)
		var st unix.Stat_t
		if err := unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := fn(p, &st, -1); err != nil {
				return err
			}
			continue
		}
		if testHookWalk != nil {
			testHookWalk(p)
		}
		sub, err := unix.Openat2(dir, n, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
		if absent(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := unix.Fstat(sub, &st); err != nil {
			unix.Close(sub)
			return err
		}
		if err := fn(p, &st, sub); err != nil {
			unix.Close(sub)
			return err
		}
		if err := walkDir(sub, rel, fn); err != nil {
			return err
		}
	}
	return nil
}

// Release unmounts session's layers: the session has ended.
func (s *Store) Release(session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.of(session)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if m, ok := s.mounted[r.ID]; ok {
			m.Close()
			delete(s.mounted, r.ID)
		}
	}
	return nil
}

// view is the merged tree of layer r over base, its path (openPath): the
// session's own mount while it runs, else a read-only mount of its own,
// which done lets go of.
func (s *Store) view(r record, base *tree) (view *tree, uppers []string, done func(), err error) {
	md, err := s.drv.Metadata(r.ID)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("layer of %s: %w", r.Path, err)
	}
	uppers = append([]string{md["UpperDir"]}, splitLowers(md["LowerDir"])...)
	if m, ok := s.mounted[r.ID]; ok {
		t, err := treeOf(m)
		if err != nil {
			return nil, nil, nil, err
		}
		return t, uppers, t.close, nil
	}
	m, err := mountOverlay(uppers, base, false, "", "")
	if err != nil {
		return nil, nil, nil, err
	}
	defer m.Close()
	t, err := treeOf(m)
	if err != nil {
		return nil, nil, nil, err
	}
	return t, uppers, t.close, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// diff is what layer r changes in its path.
func (s *Store) diff(r record, withPatch bool) (Diff, error) {
	base, err := r.openPath()
	if err != nil {
		return Diff{}, err
	}
	defer base.close()
	view, uppers, done, err := s.view(r, base)
	if err != nil {
		return Diff{}, err
	}
	defer done()
	d, err := diffTrees(view, base, uppers, withPatch, reader{uid: r.PathUID, gid: r.PathGID})
	d.Layer = r.Info
	return d, err
}

func diffTrees(view, base *tree, uppers []string, withPatch bool, who reader) (Diff, error) {
	paths, err := candidates(uppers, base)
	if err != nil {
		return Diff{}, fmt.Errorf("read layer: %w", err)
	}
	changes, err := compare(view, base, paths)
	if err != nil {
		return Diff{}, err
	}
	d := Diff{Changes: changes}
	if withPatch {
		if d.Patch, err = patch(view, base, changes, who); err != nil {
			return Diff{}, err
		}
	}
	return d, nil
}

// Diff is what session's layers change, one Diff per layer.
func (s *Store) Diff(session string, withPatch bool) ([]Diff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.of(session)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("session %s: %w", session, ErrNotFound)
	}
	var out []Diff
	for _, r := range recs {
		d, err := s.diff(r, withPatch)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// settle checks that session's layers may be committed or discarded:
// not run on, and no layer started on them.
func (s *Store) settle(session string) ([]record, error) {
	recs, parents, err := s.records()
	if err != nil {
		return nil, err
	}
	var mine []record
	for _, r := range recs {
		if r.Session == session {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("session %s: %w", session, ErrNotFound)
	}
	for _, r := range mine {
		if _, ok := s.mounted[r.ID]; ok {
			return nil, fmt.Errorf("session %s still runs on its layer of %s; wait for it to end or kill it: %w", session, r.Path, ErrBusy)
		}
		for _, o := range recs {
			if parents[o.ID] == r.ID {
				return nil, fmt.Errorf("session %s's layer of %s was started on by session %s; commit or discard that one first: %w", session, r.Path, o.Session, ErrBusy)
			}
		}
	}
	return mine, nil
}

// Discard drops session's layers.
func (s *Store) Discard(session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.settle(session)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := s.remove(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) remove(r record) error {
	if err := s.st.DeleteLayer(r.ID); err != nil {
		return fmt.Errorf("remove layer of %s: %w", r.Path, err)
	}
	if r.Manifest == r.ID {
		os.Remove(filepath.Join(s.manifests(), r.ID))
	}
	return nil
}

// manifestEntry is a path as the manifest saw it.
type manifestEntry struct {
	Ino, Size    uint64
	Mtime, Ctime int64
	Mode         uint32
}

func entryOf(st *unix.Stat_t) manifestEntry {
	return manifestEntry{Ino: st.Ino, Size: uint64(st.Size), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Mode: st.Mode}
}

// writeManifest records every path beneath root as it is now, for a
// commit to tell what changed on the host since. Other filesystems
// mounted beneath are not part of an overlay's lower layer, nor of it.
// The walk goes from root's descriptor down, directory by directory,
// never through a symlink: the names it records must be those beneath
// the directory the overlay is made of.
func writeManifest(file string, root *tree) error {
	var st unix.Stat_t
	if err := unix.Fstat(root.fd, &st); err != nil {
		return fmt.Errorf("manifest of %s: %w", root.root, err)
	}
	fd, err := root.openat(".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("manifest of %s: %w", root.root, err)
	}
	m := map[string]manifestEntry{}
	if err := walkManifest(fd, "", st.Dev, m); err != nil {
		return fmt.Errorf("manifest of %s: %w", root.root, err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("manifest of %s: %w", root.root, err)
	}
	if err := gob.NewEncoder(f).Encode(m); err != nil {
		f.Close()
		return fmt.Errorf("manifest of %s: %w", root.root, err)
	}
	return f.Close()
}

// walkManifest records in m what the directory dir (rel beneath the root,
// on device dev) holds, and beneath; it closes dir. What cannot be read
// beneath the root is left out, as a commit then finds it changed.
func walkManifest(dir int, rel string, dev uint64, m map[string]manifestEntry) error {
	f := os.NewFile(uintptr(dir), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		if rel == "" {
			return err
		}
		return nil
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Dev != dev {
			continue
		}
		p := filepath.Join(rel, n)
		m[p] = entryOf(&st)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := unix.Openat2(dir, n, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
		if err != nil {
			continue
		}
		if err := walkManifest(sub, p, dev, m); err != nil {
			return err
		}
	}
	return nil
}

func readManifest(file string) (map[string]manifestEntry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	var m map[string]manifestEntry
	if err := gob.NewDecoder(f).Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", file, err)
	}
	return m, nil
}

// mapped is a detached ID-mapped clone of the layered path, as m says.
func mapped(base *tree, m *IDMap) (*tree, error) {
	path := base.root
	pid, done, err := idmap.CreateUsernsProcess(
		// An ID-mapped mount shows an owner k as the id that k maps to
		// outside the namespace.
		[]idtools.IDMap{{ContainerID: int(m.Owner), HostID: int(m.UID), Size: 1}},
		[]idtools.IDMap{{ContainerID: int(m.Group), HostID: int(m.GID), Size: 1}})
	if err != nil {
		// Where user namespaces are denied, no layer of another's path
		// can be shown to the sandbox as its own.
		return nil, fmt.Errorf("%w: %w: a user namespace to map the owner of %s: %w", ErrUnsupported, ErrUnmappable, path, err)
	}
	defer done()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return nil, fmt.Errorf("user namespace to map the owner of %s: %w", path, err)
	}
	defer ns.Close()
	clone, err := unix.OpenTree(base.fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, fmt.Errorf("%w: open_tree %s: %w", ErrUnsupported, path, err)
	}
	if err := unix.MountSetattr(clone, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}); err != nil {
		unix.Close(clone)
		return nil, fmt.Errorf("%w: %w: an ID-mapped mount of %s, showing its owner %d as the sandbox's uid %d: %w", ErrUnsupported, ErrUnmappable, path, m.Owner, m.UID, err)
	}
	return &tree{root: path, fd: clone}, nil
}
