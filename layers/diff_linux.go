//go:build linux

package layers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// opaqueXattr marks an upper directory that hides whatever the layers
// below have at its path (it replaced a directory that was removed).
const opaqueXattr = "trusted.overlay.opaque"

// candidates are the paths a layer chain can have changed: everything in
// its upper directories (whiteouts included), and beneath an opaque
// directory everything the base has there.
func candidates(uppers []string, base *tree) ([]string, error) {
	seen := map[string]bool{}
	for _, up := range uppers {
		err := walkUpper(up, func(rel string, _ *unix.Stat_t, dir int) error {
			seen[rel] = true
			if dir >= 0 && isOpaque(dir) {
				return addBase(base, rel, seen)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePaths)
	return out, nil
}

// comparePaths orders a directory right before what it holds.
func comparePaths(a, b string) int {
	return strings.Compare(strings.ReplaceAll(a, "/", "\x00"), strings.ReplaceAll(b, "/", "\x00"))
}

// isOpaque says whether the upper directory open as dir is opaque.
func isOpaque(dir int) bool {
	buf := make([]byte, 4)
	n, err := unix.Fgetxattr(dir, opaqueXattr, buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// addBase adds what the base holds beneath rel.
func addBase(base *tree, rel string, seen map[string]bool) error {
	names, err := base.names(rel)
	if absent(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		c := filepath.Join(rel, n)
		seen[c] = true
		st, ok, err := base.lstat(c)
		if err != nil {
			return err
		}
		if ok && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := addBase(base, c, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// compare lists how view (the merged layer) differs from base (the
// layered path) at the candidate paths.
func compare(view, base *tree, paths []string) ([]Change, error) {
	var out []Change
	var gone []string // directories of base the change replaces
	for _, p := range paths {
		if slices.ContainsFunc(gone, func(g string) bool { return strings.HasPrefix(p, g+"/") }) {
			continue
		}
		bs, inBase, err := base.lstat(p)
		if err != nil {
			return nil, err
		}
		vs, inView, err := view.lstat(p)
		if err != nil {
			return nil, err
		}
		bm, vm := modeOf(&bs), modeOf(&vs)
		switch {
		case !inBase && !inView:
			continue
		case !inBase:
			out = append(out, Change{Path: p, Kind: Added, Type: fileType(vm), NewMode: vm, Size: vs.Size})
			continue
		case !inView:
			out = append(out, Change{Path: p, Kind: Deleted, Type: fileType(bm), OldMode: bm})
			if bm.IsDir() {
				gone = append(gone, p)
			}
			continue
		}
		c := Change{Path: p, Type: fileType(vm), OldMode: bm, NewMode: vm, Size: vs.Size, baseDev: bs.Dev, baseIno: bs.Ino}
		same, err := sameContent(view, base, p, bm, vm, &bs, &vs)
		if err != nil {
			return nil, err
		}
		switch {
		case !same:
			c.Kind = Modified
			if bm.IsDir() {
				gone = append(gone, p)
			}
		case bm.Perm() != vm.Perm() || bm&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != vm&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky):
			c.Kind = ModeChanged
		default:
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// sameContent: the same type, and the same bytes or link target.
func sameContent(view, base *tree, p string, bm, vm fs.FileMode, bs, vs *unix.Stat_t) (bool, error) {
	if bm.Type() != vm.Type() {
		return false, nil
	}
	switch {
	case bm.IsRegular():
		if bs.Size != vs.Size {
			return false, nil
		}
		return sameBytes(view, base, p)
	case bm&fs.ModeSymlink != 0:
		a, err := base.readlink(p)
		if err != nil {
			return false, err
		}
		b, err := view.readlink(p)
		return a == b, err
	}
	return true, nil
}

func sameBytes(view, base *tree, p string) (bool, error) {
	a, err := base.open(p)
	if err != nil {
		return false, err
	}
	defer a.Close()
	b, err := view.open(p)
	if err != nil {
		return false, err
	}
	defer b.Close()
	return equalReaders(a, b)
}

func equalReaders(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		for _, err := range []error{ea, eb} {
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return false, err
			}
		}
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if na < len(ba) {
			return true, nil
		}
	}
}

// modeOf is st's type and permission bits as an fs.FileMode.
func modeOf(st *unix.Stat_t) fs.FileMode {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// reader is who a patch is for: the layered path's owner, and its group.
// Root reads everything.
type reader struct{ uid, gid uint32 }

// read returns the content of the regular file rel of t, at most
// maxPatchFile+1 bytes, if who may read it by its mode bits and search
// each directory above it there; shown is false when not. The daemon
// reads as root, and a patch must not show its caller a file it could
// not read itself (a root-owned 0600 file in the caller's tree that the
// sandbox deleted, say). The modes checked are those of the file read,
// through its descriptor; anything that cannot be stat'ed is not shown.
func (who reader) read(t *tree, rel string) (data []byte, shown bool, err error) {
	if who.uid != 0 {
		for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
			fd, err := t.openat(d, unix.O_PATH|unix.O_NOFOLLOW)
			if err != nil {
				return nil, false, nil
			}
			var st unix.Stat_t
			serr := unix.Fstat(fd, &st)
			unix.Close(fd)
			if serr != nil || !who.may(&st, 1) {
				return nil, false, nil
			}
		}
	}
	if testHookPatchRead != nil {
		testHookPatchRead(rel)
	}
	f, err := t.open(rel)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || !who.may(&st, 4) {
		return nil, false, nil
	}
	data, err = io.ReadAll(io.LimitReader(f, maxPatchFile+1))
	return data, true, err
}

// testHookPatchRead, when set, runs before a patch opens the file rel to
// read it: a test puts another in its place there.
var testHookPatchRead func(rel string)

// may reports whether who has bit (4 read, 1 search) on st by its modes.
func (who reader) may(st *unix.Stat_t, bit uint32) bool {
	switch {
	case who.uid == 0:
		return true
	case st.Uid == who.uid:
		return st.Mode&(bit<<6) != 0
	case st.Gid == who.gid:
		return st.Mode&(bit<<3) != 0
	}
	return st.Mode&bit != 0
}

// patch is the unified diff of the regular files among changes that who
// may read.
func patch(view, base *tree, changes []Change, who reader) (string, error) {
	var b strings.Builder
	for _, c := range changes {
		if c.Kind == ModeChanged {
			continue
		}
		oldFile := c.Kind != Added && c.OldMode.IsRegular()
		newFile := c.Kind != Deleted && c.NewMode.IsRegular()
		if !oldFile && !newFile {
			continue
		}
		var old, new []byte
		var err error
		shown := true
		if oldFile {
			if old, shown, err = who.read(base, c.Path); err != nil {
				return "", err
			}
		}
		if shown && newFile {
			if new, shown, err = who.read(view, c.Path); err != nil {
				return "", err
			}
		}
		if !shown {
			fmt.Fprintf(&b, "Files a/%s and b/%s differ (not shown: uid %d may not read them)\n", c.Path, c.Path, who.uid)
			continue
		}
		b.WriteString(unified(c.Path, old, new, oldFile, newFile))
	}
	return b.String(), nil
}
