//go:build linux

package layers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("layers need a root daemon")
	}
	s, _, err := Open(filepath.Join(scratch(t), "layers"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func workspace(t *testing.T) string {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "keep"), "keep\n")
	write(t, filepath.Join(ws, "edit"), "one\ntwo\n")
	write(t, filepath.Join(ws, "gone"), "gone\n")
	write(t, filepath.Join(ws, "old-name"), "moved\n")
	write(t, filepath.Join(ws, "exec"), "#!/bin/sh\n")
	write(t, filepath.Join(ws, "dir/inner"), "inner\n")
	return ws
}

func summary(d Diff) []string {
	var out []string
	for _, c := range d.Changes {
		out = append(out, c.Kind.String()+" "+c.Path)
	}
	return out
}

// Every kind of change is kept out of the host's path until commit, then
// applied exactly; discard drops it.
func TestCommitAppliesEveryChangeKind(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "new/file"), "new\n")
	write(t, filepath.Join(at(merged), "edit"), "one\n2\n")
	must(t, os.Remove(filepath.Join(at(merged), "gone")))
	must(t, os.Rename(filepath.Join(at(merged), "old-name"), filepath.Join(at(merged), "new-name")))
	must(t, os.Chmod(filepath.Join(at(merged), "exec"), 0o755))
	must(t, os.Symlink("keep", filepath.Join(at(merged), "link")))
	must(t, os.RemoveAll(filepath.Join(at(merged), "dir")))
	if _, err := os.Stat(filepath.Join(ws, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the host's path changed before commit: %v", err)
	}
	if _, err := s.Commit("s1", false, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("commit of a layer still mounted: %v, want ErrBusy", err)
	}
	must(t, s.Release("s1"))
	diffs, err := s.Diff("s1", true)
	if err != nil {
		t.Fatal(err)
	}
	got := summary(diffs[0])
	want := []string{"deleted dir", "modified edit", "mode exec", "deleted gone", "added link", "added new", "added new/file", "added new-name", "deleted old-name"}
	if !slices.Equal(got, want) {
		t.Fatalf("diff = %q, want %q", got, want)
	}
	if p := diffs[0].Patch; !strings.Contains(p, "-two\n+2\n") || !strings.Contains(p, "+++ b/new/file") {
		t.Errorf("patch lacks the edit or the new file:\n%s", p)
	}
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{"new/file": "new\n", "edit": "one\n2\n", "new-name": "moved\n", "keep": "keep\n"} {
		b, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil || string(b) != content {
			t.Errorf("%s after commit: %q, %v; want %q", p, b, err, content)
		}
	}
	for _, p := range []string{"gone", "old-name", "dir"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after commit: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(ws, "exec")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("exec after commit: %v %v", fi.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(ws, "link")); err != nil || l != "keep" {
		t.Errorf("link after commit: %q %v", l, err)
	}
	if l, _ := s.Of("s1"); len(l) != 0 {
		t.Errorf("layer kept after commit: %v", l)
	}
}

func TestCommitRefusesWhatChangedUnderneath(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "edit"), "sandbox\n")
	write(t, filepath.Join(at(merged), "keep"), "sandbox\n")
	must(t, s.Release("s1"))
	write(t, filepath.Join(ws, "edit"), "host\n")
	_, err = s.Commit("s1", false, nil)
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"edit"}) {
		t.Fatalf("commit = %v, want a conflict naming edit alone", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "keep")); string(b) != "keep\n" {
		t.Errorf("a refused commit applied keep: %q", b)
	}
	if _, err := s.Commit("s1", true, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "edit")); string(b) != "sandbox\n" {
		t.Errorf("forced commit: edit = %q", b)
	}
}

func TestStackedLayersAndDiscard(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	_, m1, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(m1), "step1"), "1\n")
	must(t, s.Release("s1"))
	var merged [2]*os.File
	for i, id := range []string{"a", "b"} {
		if _, merged[i], err = s.Create(id, ws, "s1", Owner{}, Sandbox{}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(at(merged[i]), "step1")); err != nil || string(b) != "1\n" {
			t.Fatalf("stacked layer %s does not see its parent's file: %q %v", id, b, err)
		}
		write(t, filepath.Join(at(merged[i]), "try-"+id), id)
		must(t, s.Release(id))
	}
	if err := s.Discard("s1"); !errors.Is(err, ErrBusy) {
		t.Fatalf("discard of a layer others stand on: %v, want ErrBusy", err)
	}
	da, err := s.Diff("a", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(da[0]); !slices.Equal(got, []string{"added step1", "added try-a"}) {
		t.Errorf("diff of a = %q", got)
	}
	must(t, s.Discard("b"))
	if _, err := s.Commit("a", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "try-b")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the discarded continuation reached the host")
	}
	if _, err := os.Stat(filepath.Join(ws, "try-a")); err != nil {
		t.Error(err)
	}
	must(t, s.Discard("s1"))
}

// A commit must not follow a symlink the host's path or the layer put in
// the way, whatever the daemon's privileges.
func TestCommitDoesNotFollowSymlinks(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	outside := t.TempDir()
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "sub/file"), "x\n")
	must(t, s.Release("s1"))
	must(t, os.Symlink(outside, filepath.Join(ws, "sub")))
	var ce *ConflictError
	if _, err := s.Commit("s1", false, nil); !errors.As(err, &ce) {
		t.Fatalf("commit over a symlink made since: %v, want a conflict", err)
	}
	// Forced, the layer's directory replaces the symlink.
	if _, err := s.Commit("s1", true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "file")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("commit wrote through a symlink: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "sub")); err != nil || !fi.IsDir() {
		t.Fatalf("sub after commit: %v %v", fi, err)
	}
}

// A daemon that dies leaves nothing mounted (the overlays are detached),
// its whole layers usable and its unfinished ones removed.
func TestReopenKeepsLayersAndRemovesUnfinishedOnes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("layers need a root daemon")
	}
	dir := filepath.Join(scratch(t), "layers")
	s, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace(t)
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "f"), "f\n")
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), dir) {
		t.Errorf("a layer is mounted in the mount table:\n%s", b)
	}
	// As a daemon that died making a layer: the library's layer, no record.
	half, err := s.st.CreateLayer("", "", nil, "", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, cleaned, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !slices.Equal(cleaned, []string{"unfinished layer " + half.ID}) {
		t.Errorf("cleaned = %q, want the unfinished layer %s", cleaned, half.ID)
	}
	d, err := s2.Diff("s1", false)
	if err != nil || !slices.Equal(summary(d[0]), []string{"added f"}) {
		t.Fatalf("layer after reopening: %v %v", d, err)
	}
}

// A daemon killed while the storage library probed overlay, the first
// time it opened its store, left the probe's overlay mounted in the host's
// mount table and its directory in the store: the next Open unmounts and
// removes them, says so, and leaves alone a filesystem mounted at the
// store itself.
func TestOpenRemovesWhatADaemonKilledWhileProbingLeft(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting overlay needs root")
	}
	dir := filepath.Join(scratch(t), "layers")
	must(t, os.Mkdir(dir, 0o700))
	// An operator's own filesystem for the layers is not the daemon's.
	must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700"))
	probe := filepath.Join(dir, "storage", "overlay", "compat1234")
	for _, d := range []string{"lower1", "lower2", "upper", "work", "merged"} {
		must(t, os.MkdirAll(filepath.Join(probe, d), 0o700))
	}
	merged := filepath.Join(probe, "merged")
	must(t, unix.Mount("overlay", merged, "overlay", 0, fmt.Sprintf("lowerdir=%s:%s,upperdir=%s,workdir=%s",
		filepath.Join(probe, "lower1"), filepath.Join(probe, "lower2"), filepath.Join(probe, "upper"), filepath.Join(probe, "work"))))
	unmounted := filepath.Join(dir, "storage", "overlay", "volatile-check99")
	must(t, os.MkdirAll(filepath.Join(unmounted, "merged"), 0o700))
	if got := mountsBeneath(t, dir); !slices.Equal(got, []string{merged}) {
		t.Fatalf("mounts beneath the store before Open: %q, want the probe's %s", got, merged)
	}

	// The state directory may be named through a link; the mount table
	// names the real path.
	link := filepath.Join(filepath.Dir(dir), "link")
	must(t, os.Symlink(dir, link))
	s, cleaned, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := mountsBeneath(t, dir); len(got) != 0 {
		t.Errorf("mounts beneath the store after Open: %q, want none", got)
	}
	for _, want := range []string{"mount " + merged, "overlay probe directory " + probe, "overlay probe directory " + unmounted} {
		if !slices.Contains(cleaned, want) {
			t.Errorf("cleaned = %q, lacks %q", cleaned, want)
		}
	}
	for _, p := range []string{probe, unmounted} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Open: %v", p, err)
		}
	}
	if m, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir)); err != nil || len(m) != 1 {
		t.Errorf("the filesystem mounted at the store itself after Open: %v %v, want it kept", m, err)
	}
	// The store works on the operator's filesystem.
	if _, _, err := s.Create("s1", workspace(t), "", Owner{}, Sandbox{}); err != nil {
		t.Fatal(err)
	}
}

// scratch is a temporary directory whose mounts are unmounted before it is
// removed, so that a failing test leaves nothing in the host's mount
// table, and its removal does not reach into a mount.
func scratch(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, m := range slices.Backward(mountsBeneath(t, dir)) {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", m, err)
			}
		}
	})
	return dir
}

// mountsBeneath are the mount points strictly beneath dir, in the order
// of the mount table.
func mountsBeneath(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range mounts {
		if m.Mountpoint != dir {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}

// at is where the test reaches the root of a detached mount by path.
func at(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A commit never writes the daemon's own paths (its state, its sockets)
// onto the host, nor removes a directory holding one: refused whole,
// force or not, with nothing applied.
func TestCommitKeepsOffTheDaemonsPaths(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	kept := filepath.Join(ws, "dir", "state")
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "dir/state/launcher-journal/entry-1"), "{}")
	write(t, filepath.Join(at(merged), "new"), "new\n")
	must(t, s.Release("s1"))
	for _, force := range []bool{false, true} {
		if _, err := s.Commit("s1", force, []string{kept}); err == nil {
			t.Fatalf("commit (force %v) of a layer writing %s: no error", force, kept)
		}
	}
	for _, p := range []string{"dir/state", "new"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s applied by a refused commit: %v", p, err)
		}
	}
	if _, err := s.Commit("s1", false, []string{filepath.Join(ws, "elsewhere")}); err != nil {
		t.Fatalf("commit keeping a path the layer does not touch: %v", err)
	}
}

// A commit or diff of a layer whose path was moved away since, and a
// symlink or another directory put in its place (or in a parent's place),
// is refused: the daemon would otherwise write, as root, wherever the
// link leads (an /etc/ld.so.preload of the caller's choosing), and show
// what is there. The sandbox itself can do the moving when the layer is
// within a write root.
func TestCommitRefusesAPathMovedSinceTheLayerWasMade(t *testing.T) {
	s := openStore(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "x", "etc")
	write(t, filepath.Join(ws, "shadow"), "mine\n")
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "ld.so.preload"), "evil.so\n")
	must(t, os.Remove(filepath.Join(at(merged), "shadow")))
	must(t, s.Release("s1"))
	real := filepath.Join(tmp, "x.real")
	must(t, os.Rename(filepath.Join(tmp, "x"), real))
	outside := filepath.Join(tmp, "outside")
	write(t, filepath.Join(outside, "etc", "shadow"), "secret\n")
	for name, swap := range map[string]func(){
		"a symlinked parent": func() { must(t, os.Symlink(outside, filepath.Join(tmp, "x"))) },
		"another directory":  func() { must(t, os.Rename(outside, filepath.Join(tmp, "x"))) },
	} {
		swap()
		d, err := s.Diff("s1", true)
		if !errors.Is(err, ErrPathChanged) {
			t.Errorf("%s: diff = %v, want ErrPathChanged", name, err)
		}
		if len(d) > 0 && strings.Contains(d[0].Patch, "secret") {
			t.Errorf("%s: diff shows what is outside the layered path:\n%s", name, d[0].Patch)
		}
		for _, force := range []bool{false, true} {
			if _, err := s.Commit("s1", force, nil); !errors.Is(err, ErrPathChanged) {
				t.Errorf("%s: commit (force %v) = %v, want ErrPathChanged", name, force, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(ws, "ld.so.preload")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the commit wrote ld.so.preload there: %v", name, err)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "shadow")); err != nil || string(b) != "secret\n" {
			t.Errorf("%s: shadow there after the commit: %q %v", name, b, err)
		}
		if err := os.Rename(filepath.Join(tmp, "x"), outside); err != nil {
			must(t, os.Remove(filepath.Join(tmp, "x")))
		}
	}
	// Its owner changed: refused too.
	must(t, os.Rename(real, filepath.Join(tmp, "x")))
	must(t, os.Chown(ws, 1234, 1234))
	if _, err := s.Commit("s1", true, nil); !errors.Is(err, ErrPathChanged) {
		t.Errorf("commit of a path whose owner changed = %v, want ErrPathChanged", err)
	}
	// Back as it was, it commits.
	must(t, os.Chown(ws, 0, 0))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "ld.so.preload")); err != nil || string(b) != "evil.so\n" {
		t.Errorf("ld.so.preload after the commit: %q %v", b, err)
	}
}

// A mode-only change is made on the inode the commit compared, and only
// on one the layered path's owner owns: a sandbox that replaced another
// uid's file in its owner's tree with a copy (cp f f2; mv f2 f; chmod)
// must not have the daemon chmod that uid's inode as root, which may be a
// hard link of any file on the filesystem.
func TestCommitChangesNoModeOfAnotherOwnersFile(t *testing.T) {
	s := openStore(t)
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "theirs"), "secret\n")
	must(t, os.Chmod(filepath.Join(ws, "theirs"), 0o600))
	write(t, filepath.Join(ws, "mine"), "mine\n")
	must(t, os.Chown(filepath.Join(ws, "mine"), 1234, 1234))
	must(t, os.Chown(ws, 1234, 1234))
	_, merged, err := s.Create("s1", ws, "", user1234, Sandbox{UID: 1234, GID: 1234})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"theirs", "mine"} {
		p := filepath.Join(at(merged), name)
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(p+".copy", b, 0o600))
		must(t, os.Rename(p+".copy", p))
		must(t, os.Chmod(p, 0o666))
	}
	must(t, s.Release("s1"))
	d, err := s.Diff("s1", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(d[0]); !slices.Equal(got, []string{"mode mine", "mode theirs"}) {
		t.Fatalf("diff = %q, want the two mode changes", got)
	}
	if _, err := s.Commit("s1", true, nil); !errors.Is(err, ErrNotOwner) {
		t.Errorf("commit of a mode change of root's file in uid 1234's path: %v, want ErrNotOwner", err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "theirs")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("root's file after the commit: %v %v, want mode 0600", fi, err)
	}
}

// A mode change is made on the inode compared, never through a symlink
// put in its place between the comparison and the change.
func TestCommitChangesNoModeThroughASymlink(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	victim := filepath.Join(t.TempDir(), "victim")
	write(t, victim, "victim\n")
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(filepath.Join(at(merged), "keep"), 0o600))
	must(t, s.Release("s1"))
	testHookApply = func() {
		must(t, os.Remove(filepath.Join(ws, "keep")))
		must(t, os.Symlink(victim, filepath.Join(ws, "keep")))
	}
	t.Cleanup(func() { testHookApply = nil })
	if _, err := s.Commit("s1", true, nil); err == nil {
		t.Error("commit of a mode change onto a symlink made since the comparison: no error")
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the symlink's target after the commit: %v %v, want mode 0644", fi, err)
	}
}

// A file the commit moves from the layer is given its mode through a
// descriptor of it: a process that kept a descriptor into the overlay
// after the session (the sandbox's command, through /proc, say) and puts
// a symlink in its place in the upper directory changes nothing it leads
// to.
func TestCommitMovesNoModeThroughASymlinkInTheLayer(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	victim := filepath.Join(t.TempDir(), "victim")
	write(t, victim, "victim\n")
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "new"), "new\n")
	must(t, os.Chmod(filepath.Join(at(merged), "new"), 0o666))
	held, err := unix.Open(at(merged), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(held) })
	must(t, s.Release("s1"))
	testHookMove = func(rel string) {
		if rel == "new" {
			must(t, unix.Unlinkat(held, "new", 0))
			must(t, unix.Symlinkat(victim, held, "new"))
		}
	}
	t.Cleanup(func() { testHookMove = nil })
	s.Commit("s1", false, nil)
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the symlink's target after the commit: %v %v, want mode 0644", fi, err)
	}
	// What the commit put at the name is the file it checked, whatever
	// was put in its place in the layer.
	if b, err := os.ReadFile(filepath.Join(ws, "new")); err == nil && string(b) != "new\n" {
		t.Errorf("the tree's new holds %q, not the file the commit checked", b)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "new")); err == nil && !fi.Mode().IsRegular() {
		t.Errorf("the tree's new is a %v, not the file the commit checked", fi.Mode())
	}
}

// A directory a commit makes is given its owner and mode through a
// descriptor of it: a symlink the path's owner put in its place as it was
// made leads nowhere.
func TestCommitGivesNoModeThroughASymlinkToWhatItMade(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	victim := filepath.Join(t.TempDir(), "victim")
	write(t, victim, "victim\n")
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Mkdir(filepath.Join(at(merged), "newdir"), 0o700))
	must(t, s.Release("s1"))
	testHookMade = func(name string) {
		if name == "newdir" {
			must(t, os.Remove(filepath.Join(ws, "newdir")))
			must(t, os.Symlink(victim, filepath.Join(ws, "newdir")))
		}
	}
	t.Cleanup(func() { testHookMade = nil })
	if _, err := s.Commit("s1", false, nil); err == nil {
		t.Error("commit of a directory replaced by a symlink as it was made: no error")
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the symlink's target after the commit: %v %v, want mode 0644", fi, err)
	}
}

// Create makes the layer of the directory it checked, whatever is put in
// the path's place meanwhile: the overlay and the manifest are made from
// the descriptor it checked, not from the path again. A caller's path
// swapped for a symlink to another uid's directory would otherwise give
// its sandbox that directory under its own upper directory.
func TestCreateLayersTheDirectoryItChecked(t *testing.T) {
	s := openStore(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	write(t, filepath.Join(ws, "mine"), "mine\n")
	other := filepath.Join(tmp, "other")
	write(t, filepath.Join(other, "secret"), "secret\n")
	testHookPinned = func() {
		must(t, os.Rename(ws, ws+".orig"))
		must(t, os.Symlink(other, ws))
	}
	t.Cleanup(func() { testHookPinned = nil })
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(at(merged))
	must(t, err)
	if len(names) != 1 || names[0].Name() != "mine" {
		t.Errorf("the layer shows %v, want the directory Create checked (mine)", names)
	}
	m, err := readManifest(filepath.Join(s.manifests(), s.mustFind(t, "s1").Manifest))
	must(t, err)
	if _, ok := m["secret"]; ok || len(m) != 1 {
		t.Errorf("the manifest holds %v, want mine alone", m)
	}
}

// A caller that is not root may layer only its own directories: Create
// checks the owner of the directory it makes the layer of.
func TestCreateRefusesAnotherOwnersPath(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	if _, _, err := s.Create("s1", ws, "", user1234, Sandbox{UID: 1234, GID: 1234, OwnPathsOnly: true}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("layer of root's directory for uid 1234: %v, want ErrNotOwner", err)
	}
	must(t, os.Chown(ws, 1234, 1234))
	if _, _, err := s.Create("s1", ws, "", user1234, Sandbox{UID: 1234, GID: 1234, OwnPathsOnly: true}); err != nil {
		t.Fatal(err)
	}
}

// A patch shows its caller no file the layered path's owner may not read:
// the daemon reads the tree as root, and a root-owned 0600 file in the
// caller's tree that the sandbox deleted would be printed as removed
// lines.
func TestPatchShowsNothingItsOwnerMayNotRead(t *testing.T) {
	s, _, merged := userLayer(t, func(ws string) {
		write(t, filepath.Join(ws, "open"), "open before\n")
		must(t, os.Chmod(filepath.Join(ws, "open"), 0o644))
	})
	must(t, os.Remove(filepath.Join(at(merged), "secret")))
	write(t, filepath.Join(at(merged), "open"), "open after\n")
	must(t, s.Release("s1"))
	diffs, err := s.Diff("s1", true)
	if err != nil || len(diffs) != 1 {
		t.Fatalf("diff: %v %v", diffs, err)
	}
	p := diffs[0].Patch
	if strings.Contains(p, "TOPSECRET") || !strings.Contains(p, "secret") {
		t.Errorf("the patch shows root's 0600 file to uid 1234 (or leaves its change out):\n%s", p)
	}
	if !strings.Contains(p, "+open after") {
		t.Errorf("the patch leaves out the change of a file uid 1234 may read:\n%s", p)
	}
}

// A commit for a path's owner that is not root makes a file it modifies
// that owner's when another user owned it: the owner could only have
// replaced that file with one of its own, not written it.
func TestCommitGivesAnotherUsersModifiedFileToThePathsOwner(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		write(t, filepath.Join(ws, "roots"), "root's\n")
		write(t, filepath.Join(ws, "mine"), "mine\n")
		must(t, os.Chown(filepath.Join(ws, "mine"), 1234, 1234))
	})
	write(t, filepath.Join(at(merged), "roots"), "the sandbox's\n")
	write(t, filepath.Join(at(merged), "mine"), "mine, changed\n")
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint32{"roots": 1234, "mine": 1234} {
		var st unix.Stat_t
		must(t, unix.Lstat(filepath.Join(ws, name), &st))
		if st.Uid != want {
			t.Errorf("%s after the commit: uid %d, want %d", name, st.Uid, want)
		}
	}
}

// A commit does not give the path's owner a file it may not read: a
// sandbox that renames root's 0600 file in the owner's tree makes the
// overlay copy it up, root's and 0600, as an added file.
func TestCommitGivesNoCopyOfAFileTheOwnerMayNotRead(t *testing.T) {
	s, ws, merged := userLayer(t, nil)
	must(t, os.Rename(filepath.Join(at(merged), "secret"), filepath.Join(at(merged), "copy")))
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", true, nil); err == nil {
		t.Error("commit of a copy of root's 0600 file for uid 1234: no error")
	}
	if st, err := os.Stat(filepath.Join(ws, "copy")); err == nil {
		t.Errorf("the copy is in the tree: %v", st.Sys())
	}
}

// A patch judges the file it reads, not one that was at the name before:
// the path's owner may rename root's 0600 file over one the sandbox
// changed between a check by name and the read.
func TestPatchJudgesTheFileItReads(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		write(t, filepath.Join(ws, "open"), "open before\n")
		must(t, os.Chown(filepath.Join(ws, "open"), 1234, 1234))
	})
	write(t, filepath.Join(at(merged), "open"), "open after\n")
	must(t, s.Release("s1"))
	testHookPatchRead = func(rel string) {
		if rel == "open" {
			os.Rename(filepath.Join(ws, "secret"), filepath.Join(ws, "open"))
		}
	}
	t.Cleanup(func() { testHookPatchRead = nil })
	diffs, err := s.Diff("s1", true)
	if err != nil || len(diffs) != 1 {
		t.Fatalf("diff: %v %v", diffs, err)
	}
	if p := diffs[0].Patch; strings.Contains(p, "TOPSECRET") {
		t.Errorf("the patch shows root's 0600 file renamed over a changed one:\n%s", p)
	}
}

// userLayer is a store and a workspace of uid 1234's holding root's 0600
// file secret (TOPSECRET) and what fill puts there, and 1234's layer of
// it as session s1: its merged view.
func userLayer(t *testing.T, fill func(ws string)) (*Store, string, *os.File) {
	t.Helper()
	s := openStore(t)
	ws := workspace(t)
	must(t, os.Chown(ws, 1234, 1234))
	write(t, filepath.Join(ws, "secret"), "TOPSECRET\n")
	must(t, os.Chmod(filepath.Join(ws, "secret"), 0o600))
	if fill != nil {
		fill(ws)
	}
	_, merged, err := s.Create("s1", ws, "", user1234, Sandbox{UID: 1234, GID: 1234, OwnPathsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, ws, merged
}

func (s *Store) mustFind(t *testing.T, session string) record {
	t.Helper()
	recs, err := s.of(session)
	if err != nil || len(recs) != 1 {
		t.Fatalf("layers of %s: %v %v", session, recs, err)
	}
	return recs[0]
}

// A commit removing a directory does not reach into a filesystem mounted
// beneath it: what that holds is not the layered path's.
func TestCommitRemovesNothingOnAnotherFilesystem(t *testing.T) {
	s := openStore(t)
	ws := filepath.Join(scratch(t), "ws")
	write(t, filepath.Join(ws, "dir", "file"), "file\n")
	mnt := filepath.Join(ws, "dir", "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0755"))
	write(t, filepath.Join(mnt, "precious"), "precious\n")
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(filepath.Join(at(merged), "dir")))
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err == nil {
		t.Error("commit removing a directory with a filesystem mounted beneath: no error")
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "precious")); err != nil || string(b) != "precious\n" {
		t.Errorf("the mounted filesystem's file after the commit: %q %v", b, err)
	}
}

// A layer holding what a commit cannot make (a unix socket the sandbox
// left) is refused before anything is applied, not halfway.
func TestCommitOfWhatCannotBeCommittedAppliesNothing(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "a-file"), "a\n")
	l, err := net.Listen("unix", filepath.Join(at(merged), "b.sock"))
	must(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", true, nil); err == nil || !strings.Contains(err.Error(), "socket") {
		t.Errorf("commit of a layer with a socket: %v, want a refusal naming the socket", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "a-file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused commit applied a-file: %v", err)
	}
}

// user1234 is the owner of userLayer's workspace, as a commit writes it.
var user1234 = Owner{UID: 1234, GID: 1234, Groups: []uint32{1234}}

// A commit for a path's owner that is not root writes with that owner's
// ids, and so makes nothing the owner could not: no file in a directory
// of root's in the owner's tree (a sandbox may remove such a directory,
// when empty, and make its own in its place, which only its layer
// shows).
func TestCommitWritesNothingTheOwnerCouldNot(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		must(t, os.Mkdir(filepath.Join(ws, "roots"), 0o755))
	})
	must(t, os.Remove(filepath.Join(at(merged), "roots")))
	must(t, os.Mkdir(filepath.Join(at(merged), "roots"), 0o755))
	write(t, filepath.Join(at(merged), "roots", "planted"), "planted\n")
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", true, nil); !errors.Is(err, ErrOwnerMayNot) {
		t.Errorf("commit into root's directory for uid 1234: %v, want ErrOwnerMayNot", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "roots", "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the commit made a file in root's directory for uid 1234: %v", err)
	}
}

// A layer of an owner that is not root whose record has not the owner's
// groups (an earlier daemon's) is not committed as root instead.
func TestCommitRefusesALayerWithoutItsOwnersGroups(t *testing.T) {
	s, ws, merged := userLayer(t, nil)
	write(t, filepath.Join(at(merged), "new"), "new\n")
	must(t, s.Release("s1"))
	r := s.mustFind(t, "s1")
	r.Creds = nil
	must(t, s.setRecord(r))
	if _, err := s.Commit("s1", true, nil); !errors.Is(err, ErrStale) {
		t.Errorf("commit of a layer recording no groups of its owner: %v, want ErrStale", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused commit applied new: %v", err)
	}
	// As its error says: diff shows the changes, and a layer made on it
	// carries them to a commit.
	if d, err := s.Diff("s1", false); err != nil || !slices.Contains(summary(d[0]), "added new") {
		t.Errorf("diff of the layer recording no groups: %v %v, want added new", d, err)
	}
	if _, _, err := s.Create("s2", ws, "s1", user1234, Sandbox{UID: 1234, GID: 1234, OwnPathsOnly: true}); err != nil {
		t.Fatal(err)
	}
	must(t, s.Release("s2"))
	if _, err := s.Commit("s2", false, nil); err != nil {
		t.Fatalf("commit of a layer made on one recording no groups: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "new")); err != nil {
		t.Errorf("the commit of the layer made on it did not carry new over: %v", err)
	}
}

// An overlay that cannot be made for another cause than the kernel's
// lack of it (a layer's directory gone, a full disk) is not refused as
// unsupported: the daemon would tell the caller that this host cannot
// have layers at all.
func TestOverlayFailureIsUnsupportedOnlyWhenItIs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlay needs root")
	}
	dir := t.TempDir()
	lower, err := openTree(dir)
	must(t, err)
	defer lower.close()
	_, err = mountOverlay(nil, lower, false, filepath.Join(dir, "gone", "upper"), filepath.Join(dir, "gone", "work"))
	if errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("overlay with a missing upper directory: %v, want ENOENT, not ErrUnsupported", err)
	}
	for errno, want := range map[unix.Errno]bool{unix.ENODEV: true, unix.EINVAL: false, unix.ENOSPC: false, unix.ENOMEM: false} {
		if got := errors.Is(overlayErr(dir, "create", errno, false), ErrUnsupported); got != want {
			t.Errorf("overlay failing with %v: unsupported %v, want %v", errno, got, want)
		}
	}
	if !errors.Is(overlayErr(dir, "lowerdir+", unix.EINVAL, true), ErrUnsupported) {
		t.Error("overlay refusing lowerdir+ with EINVAL: not unsupported")
	}
	// More layers than overlay takes, which it refuses at lowerdir+
	// with EINVAL, as a kernel without lowerdir+ does.
	var lowers []string
	for i := range ovlMaxStack {
		l := filepath.Join(dir, "lowers", strconv.Itoa(i))
		must(t, os.MkdirAll(l, 0o755))
		lowers = append(lowers, l)
	}
	if _, err := mountOverlay(lowers, lower, false, "", ""); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("overlay of %d layers over the path: %v, want an error, not ErrUnsupported", ovlMaxStack, err)
	}
	// EINVAL from the creation: the upper and work directories on
	// different mounts, say.
	up, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	must(t, os.Mkdir(up, 0o755))
	must(t, os.Mkdir(work, 0o755))
	must(t, unix.Mount("tmpfs", work, "tmpfs", 0, ""))
	t.Cleanup(func() { unix.Unmount(work, unix.MNT_DETACH) })
	must(t, os.Mkdir(filepath.Join(work, "work"), 0o755))
	m, err := mountOverlay(nil, lower, false, up, filepath.Join(work, "work"))
	if err == nil {
		m.Close()
		t.Fatal("an overlay whose upper and work directories are on different mounts was made")
	}
	if errors.Is(err, ErrUnsupported) {
		t.Errorf("overlay whose upper and work directories are on different mounts: %v, want not ErrUnsupported", err)
	}
}

// The size of a layer (and the paths a diff compares, by the same walk)
// are read from the upper directory without following a symlink the
// sandbox put in the place of a directory of it while they were read:
// the daemon would walk, as root, whatever the link leads to.
func TestUpperWalkFollowsNoSymlinkPutInTheLayer(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	info, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "d", "f"), "f\n")
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o600))
	testHookWalk = func(rel string) {
		if rel == "d" {
			must(t, os.RemoveAll(filepath.Join(at(merged), "d")))
			must(t, os.Symlink(outside, filepath.Join(at(merged), "d")))
		}
	}
	t.Cleanup(func() { testHookWalk = nil })
	if n, err := s.Size(info.ID); err != nil || n >= 1<<20 {
		t.Errorf("size of a layer whose directory became a link to 1 MiB elsewhere: %d %v", n, err)
	}
}

// What a commit can tell it may not write, in a directory the path's
// owner may not write, it refuses before it applies anything.
func TestCommitRefusesBeforeApplyingADirectoryTheOwnerMayNotWrite(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		must(t, os.Mkdir(filepath.Join(ws, "roots"), 0o755))
	})
	write(t, filepath.Join(at(merged), "a-new"), "new\n")
	must(t, os.Remove(filepath.Join(at(merged), "roots")))
	must(t, os.Mkdir(filepath.Join(at(merged), "roots"), 0o755))
	write(t, filepath.Join(at(merged), "roots", "planted"), "planted\n")
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", true, nil); !errors.Is(err, ErrOwnerMayNot) {
		t.Errorf("commit into root's directory for uid 1234: %v, want ErrOwnerMayNot", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "a-new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused commit applied a-new: %v", err)
	}
}

// A commit that stops halfway says which changes it applied.
func TestCommitThatStopsSaysWhatItApplied(t *testing.T) {
	s := openStore(t)
	ws := filepath.Join(scratch(t), "ws")
	write(t, filepath.Join(ws, "dir", "file"), "file\n")
	mnt := filepath.Join(ws, "dir", "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0755"))
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "a-new"), "new\n")
	must(t, os.RemoveAll(filepath.Join(at(merged), "dir")))
	must(t, s.Release("s1"))
	_, err = s.Commit("s1", false, nil)
	var pe *PartialError
	if !errors.As(err, &pe) || len(pe.Applied) != 1 || pe.Applied[0].Path != "a-new" || !strings.Contains(err.Error(), "added a-new") {
		t.Errorf("commit stopped by a mount point after adding a-new: %v, want a PartialError naming added a-new", err)
	}
	// dir/file may be gone: the removal of dir stopped at dir/mnt.
	if pe == nil || pe.Partly == nil || pe.Partly.Path != "dir" || !strings.Contains(err.Error(), "but for deleted dir") {
		t.Errorf("commit stopped removing dir: %v, want a PartialError saying deleted dir may be partly applied", err)
	}
}

// Discarding a layer removes its own directories only: not what a
// symlink the sandbox left in it leads to, nor a directory of the path.
func TestDiscardRemovesNothingALinkInTheLayerLeadsTo(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(outside, "precious"), "precious\n")
	must(t, os.Symlink(outside, filepath.Join(at(merged), "link")))
	must(t, os.Symlink(filepath.Join(outside, "precious"), filepath.Join(at(merged), "file-link")))
	must(t, os.RemoveAll(filepath.Join(at(merged), "dir")))
	must(t, os.Symlink(outside, filepath.Join(at(merged), "dir")))
	must(t, s.Release("s1"))
	must(t, s.Discard("s1"))
	if b, err := os.ReadFile(filepath.Join(outside, "precious")); err != nil || string(b) != "precious\n" {
		t.Errorf("outside/precious after the discard: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "dir", "inner")); err != nil || string(b) != "inner\n" {
		t.Errorf("the path's dir/inner after the discard: %q %v", b, err)
	}
}

// A committed file carries no file capabilities from the layer: the
// sandbox could set them on a file the host's owner would then run.
func TestCommitCarriesNoFileCapabilities(t *testing.T) {
	s := openStore(t)
	ws := workspace(t)
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(at(merged), "capped")
	write(t, p, "#!/bin/sh\n")
	// VFS_CAP_REVISION_2, effective, CAP_NET_RAW permitted.
	vfsCap := []byte{1, 0, 0, 2, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	must(t, unix.Setxattr(p, "security.capability", vfsCap, 0))
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(filepath.Join(ws, "capped"), "security.capability", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("the committed file's security.capability: %x %v", buf[:max(n, 0)], err)
	}
}

// chownAll gives everything beneath and at p to user1234.
func chownAll(t *testing.T, p string) {
	t.Helper()
	must(t, filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(user1234.UID), int(user1234.GID))
	}))
}

// A commit for an owner that is not root makes what a directory holds
// before it gives the directory a mode without its owner's write (go mod
// download makes its module directories 0555), whether it adds the
// directory or changes its mode: made in the other order, the owner could
// not write into it and the commit would stop halfway.
func TestCommitMakesWhatAReadOnlyDirectoryHoldsFirst(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		write(t, filepath.Join(ws, "own", "old"), "old\n")
		chownAll(t, filepath.Join(ws, "own"))
	})
	mod := filepath.Join(at(merged), "mod", "x@v1")
	write(t, filepath.Join(mod, "sub", "f.go"), "package x\n")
	write(t, filepath.Join(mod, "g.go"), "package x\n")
	write(t, filepath.Join(at(merged), "own", "new"), "new\n")
	for _, d := range []string{filepath.Join(mod, "sub"), mod, filepath.Join(at(merged), "own")} {
		must(t, os.Chmod(d, 0o555))
	}
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatalf("commit of read-only directories holding files: %v", err)
	}
	for _, f := range []string{"mod/x@v1/sub/f.go", "mod/x@v1/g.go", "own/new"} {
		if _, err := os.Lstat(filepath.Join(ws, f)); err != nil {
			t.Errorf("the commit did not make %s: %v", f, err)
		}
	}
	for _, d := range []string{"mod/x@v1/sub", "mod/x@v1", "own"} {
		if st, err := os.Lstat(filepath.Join(ws, d)); err != nil || st.Mode().Perm() != 0o555 {
			t.Errorf("committed %s: %v %v, want mode 0555", d, st.Mode(), err)
		}
	}
}

// A commit for an owner that is not root removes a tree of the owner's
// with read-only directories in it whole, as go clean -modcache would for
// the owner.
func TestCommitRemovesATreeOfReadOnlyDirectories(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		write(t, filepath.Join(ws, "cache", "x@v1", "sub", "f.go"), "package x\n")
		write(t, filepath.Join(ws, "cache", "x@v1", "g.go"), "package x\n")
		chownAll(t, filepath.Join(ws, "cache"))
		for _, d := range []string{"cache/x@v1/sub", "cache/x@v1"} {
			must(t, os.Chmod(filepath.Join(ws, d), 0o555))
		}
	})
	must(t, os.RemoveAll(filepath.Join(at(merged), "cache")))
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatalf("commit removing a tree of read-only directories: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the commit left cache: %v", err)
	}
}

// A layer nesting directories beyond what a path can name (PATH_MAX) is
// refused with errTooLong by the walks of its upper directory (its size,
// a diff's candidates), soon and holding no descriptor per level beyond
// that: a sandbox can nest 100,000 cheaply, and the size poll walks with
// the store locked.
func TestUpperWalkRefusesATreeTooDeepToName(t *testing.T) {
	s := openStore(t)
	info, merged, err := s.Create("s1", workspace(t), "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	// Just deeper than a path can name: the walk holds a descriptor per
	// level it can name, and the TempDir's removal one per level.
	const depth = unix.PathMax/2 + 50
	var lim unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &lim))
	if lim.Max < depth+256 {
		t.Skipf("a hard limit of %d open files leaves too few for a tree of %d levels", lim.Max, depth)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	}
	fd, err := unix.Open(at(merged), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for range depth {
		must(t, unix.Mkdirat(fd, "d", 0o755))
		sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		must(t, err)
		fd = sub
	}
	unix.Close(fd)
	fds := func() int {
		names, err := os.ReadDir("/proc/self/fd")
		must(t, err)
		return len(names)
	}
	before, most, levels := fds(), 0, 0
	testHookWalk = func(string) {
		if levels++; levels%500 == 0 {
			most = max(most, fds())
		}
	}
	t.Cleanup(func() { testHookWalk = nil })
	if _, err := s.Size(info.ID); !errors.Is(err, errTooLong) {
		t.Errorf("size of a layer nesting %d directories: %v, want errTooLong", depth, err)
	}
	if most-before > unix.PathMax/2+16 {
		t.Errorf("the walk held %d descriptors at once, want no more than a path can name directories", most-before)
	}
}

// A directory removed between its opening and its reading is walked as
// empty, not an error: a sandbox churning directories would otherwise
// keep its layer from being measured.
func TestUpperWalkTakesADirectoryRemovedAsItIsReadForEmpty(t *testing.T) {
	up := t.TempDir()
	write(t, filepath.Join(up, "d", "f"), "f\n")
	err := walkUpper(up, func(rel string, _ *unix.Stat_t, _ int) error {
		if rel == "d" {
			return os.RemoveAll(filepath.Join(up, "d"))
		}
		return nil
	})
	if err != nil {
		t.Errorf("walk of a directory removed as it was read: %v", err)
	}
}

// A commit for an owner that is not root that would remove another
// user's file in a sticky directory is refused as the owner may not,
// not as a failure to open a directory.
func TestCommitRemovingAnothersFileInAStickyDirectoryIsTheOwnerMayNot(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) {
		write(t, filepath.Join(ws, "tmp", "theirs"), "theirs\n")
		must(t, os.Chmod(filepath.Join(ws, "tmp"), os.ModeSticky|0o777))
		must(t, os.Chown(filepath.Join(ws, "tmp", "theirs"), 5678, 5678))
	})
	must(t, os.Remove(filepath.Join(at(merged), "tmp", "theirs")))
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); !errors.Is(err, ErrOwnerMayNot) {
		t.Errorf("commit removing uid 5678's file in a sticky directory for uid 1234: %v, want ErrOwnerMayNot", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "tmp", "theirs")); err != nil {
		t.Errorf("theirs: %v", err)
	}
}

// A commit that stops still sets the read-only modes it deferred for the
// directories it made before (deepest first, as one that ends does), and
// tells a change applied only once its mode is set.
func TestCommitThatStopsSetsTheDirectoryModesItDeferred(t *testing.T) {
	s := openStore(t)
	ws := filepath.Join(scratch(t), "ws")
	write(t, filepath.Join(ws, "dir", "file"), "file\n")
	mnt := filepath.Join(ws, "dir", "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0755"))
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at(merged), "a-ro", "sub", "f"), "f\n")
	must(t, os.Chmod(filepath.Join(at(merged), "a-ro", "sub"), 0o555))
	must(t, os.Chmod(filepath.Join(at(merged), "a-ro"), 0o555))
	must(t, os.RemoveAll(filepath.Join(at(merged), "dir")))
	must(t, s.Release("s1"))
	_, err = s.Commit("s1", false, nil)
	var pe *PartialError
	if !errors.As(err, &pe) || !slices.Equal(summary(Diff{Changes: pe.Applied}), []string{"added a-ro", "added a-ro/sub", "added a-ro/sub/f"}) {
		t.Errorf("commit stopped by a mount point after adding a-ro: %v, want a PartialError naming a-ro and what it holds", err)
	}
	for _, d := range []string{"a-ro", "a-ro/sub"} {
		if st, err := os.Lstat(filepath.Join(ws, d)); err != nil || st.Mode().Perm() != 0o555 {
			t.Errorf("%s, added by a commit that stopped: %v %v, want mode 0555", d, st.Mode(), err)
		}
	}
}

// A directory above a change that failed keeps its owner's writing and
// searching: its read-only mode would refuse the commit again once the
// failure's cause is mended. It is not told applied.
func TestCommitThatStopsLeavesWritableTheDirectoriesAboveTheFailure(t *testing.T) {
	s := openStore(t)
	ws := filepath.Join(scratch(t), "ws")
	write(t, filepath.Join(ws, "e", "sub", "file"), "file\n")
	mnt := filepath.Join(ws, "e", "sub", "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	must(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0755"))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	_, merged, err := s.Create("s1", ws, "", Owner{}, Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(filepath.Join(at(merged), "e", "sub")))
	must(t, os.Chmod(filepath.Join(at(merged), "e"), 0o555))
	must(t, s.Release("s1"))
	_, err = s.Commit("s1", false, nil)
	var pe *PartialError
	if !errors.As(err, &pe) || len(pe.Applied) != 0 {
		t.Errorf("commit stopped by a mount point below e: %v, want a PartialError telling nothing applied", err)
	}
	if st, err := os.Lstat(filepath.Join(ws, "e")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("e, above the change that failed: %v %v, want its mode left 0755", st.Mode(), err)
	}
}

// A commit stopped by its owner's credentials not being set back tells no
// directory applied whose mode it deferred: that mode was never set.
func TestCommitStoppedByLostCredentialsTellsNoDeferredModeApplied(t *testing.T) {
	s, ws, merged := userLayer(t, nil)
	write(t, filepath.Join(at(merged), "a-ro", "f"), "f\n")
	must(t, os.Chmod(filepath.Join(at(merged), "a-ro"), 0o555))
	must(t, s.Release("s1"))
	lost := errors.New("lost by the test")
	testHookMade = func(name string) {
		if name == "a-ro" {
			credsLost.Store(&lost)
		}
	}
	t.Cleanup(func() { testHookMade = nil; credsLost.Store(nil) })
	_, err := s.Commit("s1", false, nil)
	var pe *PartialError
	if !errors.As(err, &pe) || !errors.Is(err, lost) || len(pe.Applied) != 0 {
		t.Errorf("commit whose credentials were lost making a-ro: %v, want a PartialError telling nothing applied", err)
	}
	if st, err := os.Lstat(filepath.Join(ws, "a-ro")); err != nil || st.Mode().Perm() == 0o555 {
		t.Errorf("a-ro: %v %v, want it made without its mode", st.Mode(), err)
	}
}

// A read-only directory a commit makes keeps its set-group-ID bit where
// the owner is not in the group of the path (whose group it takes): the
// owner's chmod would lose it.
func TestCommitKeepsTheSetGroupIDOfAReadOnlyDirectoryItMakes(t *testing.T) {
	s, ws, merged := userLayer(t, func(ws string) { must(t, os.Chown(ws, 1234, 5678)) })
	d := filepath.Join(at(merged), "shared")
	write(t, filepath.Join(d, "f"), "f\n")
	must(t, unix.Chmod(d, 0o2555))
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "shared"), &st); err != nil || st.Mode&0o7777 != 0o2555 || st.Gid != 5678 {
		t.Errorf("committed shared: mode %04o gid %d %v, want 2555 and gid 5678", st.Mode&0o7777, st.Gid, err)
	}
}

// A removal holds one descriptor per level of the tree it empties, not
// two: a deep tree of the owner's would run the daemon out of them.
func TestRemovalHoldsOneDescriptorPerLevel(t *testing.T) {
	dir := t.TempDir()
	const depth = 100
	p := filepath.Join(dir, "tree")
	for range depth {
		p = filepath.Join(p, "d")
	}
	must(t, os.MkdirAll(p, 0o755))
	names, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	var was unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &was))
	lim := was
	lim.Cur = uint64(len(names) + depth + depth/2)
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = removeAt(fd, "tree", filepath.Join(dir, "tree"))
		unix.Close(fd)
	}
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &was))
	if err != nil {
		t.Errorf("removal of %d nested directories with %d descriptors to spare: %v", depth, depth+depth/2, err)
	}
}
