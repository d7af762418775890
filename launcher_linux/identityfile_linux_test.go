package launcherlinux

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"golang.org/x/sys/unix"
)

// sandboxPasswd is the /etc/passwd a sandbox of the test identity gets
// from the host's, skipping where it is the host's own.
func sandboxPasswd(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skip(err)
	}
	uid, gid := sandboxIdentity()
	p, _ := identityFiles(string(b), "", uid, gid)
	if p == "" {
		t.Skipf("the host's passwd names uid %d: the sandbox has the host's", uid)
	}
	return p
}

// identityBackend is a backend keeping its shared identity files in a
// directory of its own, which it returns; the backend is closed after
// the test.
func identityBackend(t *testing.T) (launcher.Backend, string) {
	t.Helper()
	dir := filepath.Join(hostDir(t, 0o755), "identity")
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetNamespaces), InitPath: initBinaryPath(t), IdentityDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	return b, dir
}

// sessionPasswd starts a sleep on b and returns its /etc/passwd: what it
// holds and which file it is.
func sessionPasswd(t *testing.T, b launcher.Backend) (string, unix.Stat_t) {
	t.Helper()
	p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
	})
	path := fmt.Sprintf("/proc/%d/root/etc/passwd", p.Pid())
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(got), st
}

// Sessions of one identity bind one file of the daemon's as /etc/passwd,
// not a copy apiece, holding what a file of the init's own would; the
// daemon's directory goes with it.
func TestSessionsShareOneIdentityFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files: TestRootlessDaemonKeepsItsOwnIdentityFiles")
	}
	want := sandboxPasswd(t)
	b, dir := identityBackend(t)
	var seen []unix.Stat_t
	for range 2 {
		got, st := sessionPasswd(t, b)
		if got != want {
			t.Errorf("/etc/passwd in the sandbox:\n%s\nwant:\n%s", got, want)
		}
		seen = append(seen, st)
	}
	if seen[0].Dev != seen[1].Dev || seen[0].Ino != seen[1].Ino {
		t.Errorf("the sessions' /etc/passwd are %d:%d and %d:%d: want one file", seen[0].Dev, seen[0].Ino, seen[1].Dev, seen[1].Ino)
	}
	var shared unix.Stat_t
	entries, _ := os.ReadDir(dir)
	found := false
	for _, e := range entries {
		if unix.Stat(filepath.Join(dir, e.Name()), &shared) == nil && shared.Dev == seen[0].Dev && shared.Ino == seen[0].Ino {
			found = true
			if shared.Uid != 0 || shared.Mode&0o7777 != 0o444 {
				t.Errorf("%s: uid %d, mode %o: want root's, 0444", e.Name(), shared.Uid, shared.Mode&0o7777)
			}
		}
	}
	if !found {
		t.Errorf("the sessions' /etc/passwd is no file of %s", dir)
	}
	b.(io.Closer).Close()
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("%s is still there once the backend closed", dir)
	}
}

// A daemon starting over finds the directory its predecessor left and
// empties it, and files that were spoiled since they were written are
// written anew before a session binds them.
func TestIdentityFilesLeftOrSpoiledAreRemade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	want := sandboxPasswd(t)
	parent := hostDir(t, 0o755)
	dir := filepath.Join(parent, "identity")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(dir, "left")
	if err := os.WriteFile(left, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetNamespaces), InitPath: initBinaryPath(t), IdentityDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	if _, err := os.Lstat(left); err == nil {
		t.Errorf("%s, left by a daemon before, is still there", left)
	}
	_, first := sessionPasswd(t, b)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		os.Chmod(p, 0o644)
		os.WriteFile(p, []byte("root:x:0:0::/:/bin/sh\n"), 0o644)
		os.Chmod(p, 0o444)
	}
	got, second := sessionPasswd(t, b)
	if got != want {
		t.Errorf("/etc/passwd after the shared file was rewritten:\n%s\nwant:\n%s", got, want)
	}
	if first.Ino == second.Ino {
		t.Error("the rewritten file was bound as it was, not written anew")
	}
}

// A write root over the daemon's directory, which the caller (root) could
// have the daemon map to the sandbox uid as the root's owner, is refused
// instead: mapped, it would let the sandbox write the file other sessions
// bind.
func TestSharedIdentityFileIsNotWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	want := sandboxPasswd(t)
	b, dir := identityBackend(t)
	_, st := sessionPasswd(t, b)
	shared := ""
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		var s unix.Stat_t
		if unix.Stat(filepath.Join(dir, e.Name()), &s) == nil && s.Ino == st.Ino {
			shared = filepath.Join(dir, e.Name())
		}
	}
	if shared == "" {
		t.Fatalf("no file of %s is the sandbox's passwd", dir)
	}
	script := `f=` + shared + `
(echo x >> $f) 2>/dev/null && echo "appended"
chmod 666 $f 2>/dev/null && echo "chmod"
mv $f $f.x 2>/dev/null && echo "renamed"
true`
	for _, w := range []string{filepath.Dir(dir), dir} {
		spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/sh", "-c", script)
		spec.RootCaller = true
		p, err := b.Start(context.Background(), spec)
		wantRefusal(t, p, err, "filesystem.write")
		if err != nil && !strings.Contains(err.Error(), "daemon's") {
			t.Errorf("write %s: refused for another reason: %v", w, err)
		}
	}
	var after unix.Stat_t
	if err := unix.Stat(shared, &after); err != nil || after.Mode&0o7777 != 0o444 || after.Ino != st.Ino {
		t.Errorf("%s: mode %o, inode %d (was %d), %v", shared, after.Mode&0o7777, after.Ino, st.Ino, err)
	}
	if b, err := os.ReadFile(shared); err != nil || string(b) != want {
		t.Errorf("%s now holds %q (%v)", shared, b, err)
	}
}

// A daemon that is not root keeps no shared files, even when given a
// directory for them: each of its sessions has its init's own, where the
// host's files do not name the sandbox uid already.
func TestRootlessDaemonKeepsItsOwnIdentityFiles(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root shares its sessions' identity files: TestSessionsShareOneIdentityFile")
	}
	b, dir := identityBackend(t)
	if b.(*backend).identities != nil {
		t.Error("a rootless daemon keeps a store of shared identity files")
	}
	if _, serr, st := runWith(t, b, nil, "/bin/cat", "/etc/passwd"); st.ExitCode != 0 {
		t.Fatalf("status %+v, stderr %q", st, serr)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("a rootless daemon made %s", dir)
	}
}

// A file that is not what its name says, or not the daemon's read-only
// one, is written anew rather than trusted; a directory that others could
// change, or that the sandbox uid could not reach, is not used.
func TestIdentityStoreVerifiesContent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the store's files and every directory above them must be root's")
	}
	parent := hostDir(t, 0o711)
	dir := filepath.Join(parent, "identity")
	s := &identityStore{dir: dir}
	p, err := s.path("a:x:1:1::/:/bin/sh\n")
	if err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(){
		"rewritten": func() {
			os.Chmod(p, 0o644)
			os.WriteFile(p, []byte("b:x:0:0::/:/bin/sh\n"), 0o644)
			os.Chmod(p, 0o444)
		},
		"writable": func() { os.Chmod(p, 0o666) },
		"removed":  func() { os.Remove(p) },
	} {
		spoil()
		got, err := s.path("a:x:1:1::/:/bin/sh\n")
		var st unix.Stat_t
		if err != nil || got != p || unix.Stat(p, &st) != nil || st.Mode&0o7777 != 0o444 {
			t.Errorf("%s: %q, %v, mode %o", name, got, err, st.Mode&0o7777)
		}
		if b, _ := os.ReadFile(p); string(b) != "a:x:1:1::/:/bin/sh\n" {
			t.Errorf("%s: holds %q", name, b)
		}
	}
	for name, c := range map[string]struct {
		path string
		mode os.FileMode
	}{
		"a directory others may write":              {dir, 0o777},
		"a parent others may write":                 {parent, 0o777},
		"a parent the sandbox uid cannot search":    {parent, 0o700},
		"a directory the sandbox uid cannot search": {dir, 0o700},
	} {
		os.Chmod(c.path, c.mode)
		if _, err := (&identityStore{dir: dir}).path("c\n"); err == nil {
			t.Errorf("%s was used", name)
		}
		os.Chmod(dir, 0o755)
		os.Chmod(parent, 0o711)
	}
	unix.Chmod(parent, 0o1777)
	if _, err := (&identityStore{dir: dir}).path("c\n"); err != nil {
		t.Errorf("a sticky parent others may write, as /tmp is: %v", err)
	}
}

// A write root at or above the daemon's shared files is never mapped,
// whoever owns it.
func TestIdmapPlanKeepsTheDaemonsFilesUnmapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root maps write roots")
	}
	const uid, gid = 4242424, 4242424
	parent := hostDir(t, 0o755)
	own := filepath.Join(parent, "identity")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	writes := []string{parent, own}
	who := identity{uid: uid, gid: gid, rootCaller: true}
	if mapped, _, _ := idmapPlan(writes, SetNamespaces, who, nil); len(mapped) != 2 {
		t.Fatalf("without the daemon's files: mapped %q, want both", mapped)
	}
	mapped, _, notes := idmapPlan(writes, SetNamespaces, who, []string{own})
	if len(mapped) != 0 {
		t.Errorf("mapped %q", mapped)
	}
	for _, w := range writes {
		if n := notes[w]; !n.noChown || !strings.Contains(n.why, "daemon's") {
			t.Errorf("note for %s: %+v", w, n)
		}
	}
}
