package launcherlinux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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

// logLines collects what a backend logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// identityBackendIn is a backend keeping its shared identity files on the
// filesystem of dir, closed after the test, and what it logs.
func identityBackendIn(t *testing.T, dir string) (launcher.Backend, *logLines) {
	t.Helper()
	uid, gid := sandboxIdentity()
	logs := &logLines{}
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetNamespaces), InitPath: initBinaryPath(t), IdentityDir: dir, Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	return b, logs
}

// identityBackend is identityBackendIn a directory of its own, which it
// returns, in a parent of root's that every uid may search.
func identityBackend(t *testing.T) (launcher.Backend, string) {
	t.Helper()
	dir := filepath.Join(hostDir(t, 0o755), "identity")
	b, _ := identityBackendIn(t, dir)
	return b, dir
}

// startSleep starts a sleep on b, ended after the test.
func startSleep(t *testing.T, b launcher.Backend, pol *sandboxdv1.Policy) launcher.Process {
	t.Helper()
	p, err := b.Start(context.Background(), testSpec(t, pol, "/bin/sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
	})
	return p
}

// sessionFile is what the sandbox of p holds at name and which file it
// is.
func sessionFile(t *testing.T, p launcher.Process, name string) (string, unix.Stat_t) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/root%s", p.Pid(), name)
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

// sessionPasswd starts a sleep on b and returns its /etc/passwd: what it
// holds and which file it is.
func sessionPasswd(t *testing.T, b launcher.Backend) (string, unix.Stat_t) {
	t.Helper()
	return sessionFile(t, startSleep(t, b, nil), "/etc/passwd")
}

// fileOf is the name in dir of the file st is, "" for none.
func fileOf(dir string, st unix.Stat_t) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		var s unix.Stat_t
		if unix.Lstat(filepath.Join(dir, e.Name()), &s) == nil && s.Dev == st.Dev && s.Ino == st.Ino {
			return filepath.Join(dir, e.Name())
		}
	}
	return ""
}

// Sessions of one identity bind one file of the daemon's as /etc/passwd,
// not a copy apiece, holding what a file of the init's own would, root's
// and 0444, in a directory of root's that no one else may enter; the
// directory goes with the daemon, and the running sessions keep their
// file.
func TestSessionsShareOneIdentityFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files: TestRootlessDaemonKeepsItsOwnIdentityFiles")
	}
	want := sandboxPasswd(t)
	b, dir := identityBackend(t)
	var seen []unix.Stat_t
	var first launcher.Process
	for range 2 {
		p := startSleep(t, b, nil)
		if first == nil {
			first = p
		}
		got, st := sessionFile(t, p, "/etc/passwd")
		if got != want {
			t.Errorf("/etc/passwd in the sandbox:\n%s\nwant:\n%s", got, want)
		}
		if st.Uid != 0 || st.Mode&0o7777 != 0o444 {
			t.Errorf("/etc/passwd: uid %d, mode %o: want root's, 0444", st.Uid, st.Mode&0o7777)
		}
		seen = append(seen, st)
	}
	if seen[0].Dev != seen[1].Dev || seen[0].Ino != seen[1].Ino {
		t.Errorf("the sessions' /etc/passwd are %d:%d and %d:%d: want one file", seen[0].Dev, seen[0].Ino, seen[1].Dev, seen[1].Ino)
	}
	if fileOf(dir, seen[0]) == "" {
		t.Errorf("the sessions' /etc/passwd is no file of %s", dir)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Uid != 0 || st.Mode&0o7777 != 0o700 {
		t.Errorf("%s: uid %d, mode %o (%v): want root's, 0700", dir, st.Uid, st.Mode&0o7777, err)
	}
	b.(io.Closer).Close()
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("%s is still there once the backend closed", dir)
	}
	if got, _ := sessionFile(t, first, "/etc/passwd"); got != want {
		t.Errorf("a running session's /etc/passwd after Close:\n%s", got)
	}
}

// What the init binds is the file the daemon wrote, whatever was done to
// the names meanwhile: it gets a mount of the daemon's descriptor, and
// looks no name up. A file put in the place of the daemon's, under its
// name, never reaches a sandbox; a file whose name is gone is made anew.
func TestSharedIdentityFileIsTheOneWritten(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	want := sandboxPasswd(t)
	b, dir := identityBackend(t)
	_, before := sessionPasswd(t, b)
	name := fileOf(dir, before)
	if name == "" {
		t.Fatalf("no file of %s is the sandbox's passwd", dir)
	}
	const forged = "root:x:0:0::/:/bin/sh\nsandbox:x:0:0::/:/bin/sh\n"
	if err := os.Rename(name, name+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(forged), 0o444); err != nil {
		t.Fatal(err)
	}
	got, after := sessionPasswd(t, b)
	if got != want || after.Ino != before.Ino {
		t.Errorf("/etc/passwd once another file took the shared one's name: inode %d (was %d), holding\n%s", after.Ino, before.Ino, got)
	}
	if err := os.Remove(name + ".moved"); err != nil {
		t.Fatal(err)
	}
	if got, after = sessionPasswd(t, b); got != want || after.Ino == before.Ino {
		t.Errorf("/etc/passwd once the shared one's name was removed: inode %d (was %d), holding\n%s", after.Ino, before.Ino, got)
	}
}

// What the daemon sends is what the init binds, or the launch fails: a
// session never has the host's /etc/passwd for want of the daemon's. The
// daemon's file missing from its mount namespace fails the launch in the
// daemon; a mount that is no file fails it in the init. Either way the
// session gives back its reference to the file.
func TestSharedIdentityFileMissingFailsTheLaunch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	for name, lose := range map[string]func(t *testing.T, mnt string, s *identityStore){
		// Still named, so the daemon keeps it, but unmounted: no mount
		// of it can be made.
		"missing": func(t *testing.T, mnt string, s *identityStore) {
			if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
				t.Fatal(err)
			}
		},
		// A mount that cannot cover a file, as one of a name removed
		// after the daemon made it could not.
		"not a file": func(t *testing.T, mnt string, s *identityStore) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, f := range s.files {
				notFile, err := os.OpenFile(mnt, unix.O_PATH|unix.O_DIRECTORY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.file.Close()
				f.file = notFile
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			mnt := hostDir(t, 0o755)
			if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0755"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
			b, _ := identityBackendIn(t, filepath.Join(mnt, "identity"))
			if _, _, st := runWith(t, b, nil, "/bin/true"); st.ExitCode != 0 {
				t.Fatalf("status %+v", st)
			}
			s := b.(*backend).identities
			lose(t, mnt, s)
			p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/cat", "/etc/passwd"))
			if err == nil {
				p.Kill()
				p.Wait()
				t.Fatal("a session started without the daemon's /etc/passwd")
			}
			if !strings.Contains(err.Error(), "/etc/passwd") {
				t.Errorf("Start: %v, want it to name /etc/passwd", err)
			}
			wantReleased(t, s)
		})
	}
}

// wantReleased fails unless no session holds a file of s; the sessions
// the test started have ended.
func wantReleased(t *testing.T, s *identityStore) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.files) == 0 {
		t.Fatal("the store holds no file")
	}
	for _, f := range s.files {
		if f.refs != 0 {
			t.Errorf("a file is held %d times once its sessions ended or failed", f.refs)
		}
	}
}

// The sandbox cannot change the file it shares with other sessions: not
// through its /etc/passwd, even beneath a write root, and not through a
// write root over the daemon's directory, even one a root caller's grant
// ID-maps to the sandbox uid: the directory is masked.
func TestSharedIdentityFileIsNotWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	want := sandboxPasswd(t)
	b, dir := identityBackend(t)
	_, st := sessionPasswd(t, b)
	shared := fileOf(dir, st)
	if shared == "" {
		t.Fatalf("no file of %s is the sandbox's passwd", dir)
	}
	// A root caller's grant of the directory's parent is ID-mapped: the
	// sandbox owns what is there, but the daemon's directory is masked.
	reach := `ls -A "$D" 2>/dev/null
cat "$D"/* 2>/dev/null && echo read
(echo x >> "$F") 2>/dev/null && echo appended
chmod 666 "$F" 2>/dev/null && echo chmod
mv "$D" "$D.x" 2>/dev/null && echo renamed
true`
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{filepath.Dir(dir)}}}, "/bin/sh", "-c", reach)
	spec.Env = append(spec.Env, "D="+dir, "F="+shared)
	spec.RootCaller = true
	if out, serr, _, status, err := runSpec(t, b, spec); err != nil || status.ExitCode != 0 || out != "" {
		t.Errorf("a root caller's write root over the daemon's directory: status %+v, %v, stderr %q; the sandbox did or found:\n%s", status, err, serr, out)
	}
	work := hostDir(t, 0o777)
	script := `(echo x >> /etc/passwd) 2>/dev/null && echo appended
chmod 666 /etc/passwd 2>/dev/null && echo chmod
mv /etc/passwd /etc/passwd.x 2>/dev/null && echo renamed
mv /etc/passwd "$W/p" 2>/dev/null && echo moved
ln /etc/passwd "$W/l" 2>/dev/null && echo linked
(echo x > /etc/passwd) 2>/dev/null && echo truncated
true`
	for _, rootCaller := range []bool{false, true} {
		spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{work}}}, "/bin/sh", "-c", script)
		spec.Env = append(spec.Env, "W="+work)
		spec.RootCaller = rootCaller
		out, serr, _, status, err := runSpec(t, b, spec)
		if err != nil || status.ExitCode != 0 {
			t.Fatalf("root caller %v: status %+v, %v, stderr %q", rootCaller, status, err, serr)
		}
		if out != "" {
			t.Errorf("root caller %v: the sandbox's /etc/passwd was changed:\n%s", rootCaller, out)
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

// A write root within the directory, at a file whose name the daemon
// chose and a sandbox can guess, is refused: ID-mapped for a root caller,
// it would hand the sandbox the file every session binds.
func TestWriteRootWithinIdentityFilesIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	b, dir := identityBackend(t)
	_, st := sessionPasswd(t, b)
	shared := fileOf(dir, st)
	if shared == "" {
		t.Fatalf("no file of %s is the sandbox's passwd", dir)
	}
	for _, w := range []string{shared, dir} {
		spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/true")
		spec.RootCaller = true
		p, err := b.Start(context.Background(), spec)
		if err == nil {
			p.Wait()
			t.Errorf("write root %s within the identity files started", w)
			continue
		}
		var u *launcher.Unenforceable
		// Refused as the daemon's own, before any setup: the 0700
		// directory alone would fail the init's bind later, naming the
		// sandbox's uid and a remedy that cannot help.
		if !errors.As(err, &u) || u.Field != "filesystem.write" || !strings.Contains(u.Mechanism, "daemon's own state") {
			t.Errorf("write root %s: %v, want a refusal of filesystem.write as the daemon's own state", w, err)
		}
	}
}

// Every tree the daemon hands an init is private: a clone stays in its
// source's peer group, and a carve-out the init mounts on it (a deny of
// /etc/passwd, a read-only path in a write root) would otherwise reach the
// host's mount of a shared tree (systemd makes / and /run shared) and
// every session binding the same file.
func TestDaemonsTreesArePrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a mount namespace and shared mounts")
	}
	base := t.TempDir()
	done := make(chan error, 1)
	go func() {
		// The thread ends with the goroutine, and its mount namespace
		// with it.
		runtime.LockOSThread()
		done <- treesPrivateIn(base)
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func treesPrivateIn(base string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", src, "tmpfs", 0, ""); err != nil {
		return err
	}
	if err := unix.Mount("", src, "", unix.MS_SHARED, ""); err != nil {
		return err
	}
	file := filepath.Join(src, "passwd")
	if err := os.WriteFile(file, []byte("root:x:0:0::/:/bin/sh\n"), 0o444); err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	dir, err := os.Open(src)
	if err != nil {
		return err
	}
	defer dir.Close()
	for _, c := range []struct {
		name string
		make func() (int, error)
		dst  string
		dir  bool
	}{
		{"identity file", (&identityFile{file: f}).mount, filepath.Join(base, "passwd"), false},
		{"layer clone", func() (int, error) { return cloneTree(dir) }, filepath.Join(base, "layer"), true},
	} {
		var err error
		if c.dir {
			err = os.Mkdir(c.dst, 0o755)
		} else {
			err = os.WriteFile(c.dst, nil, 0o644)
		}
		if err != nil {
			return err
		}
		tree, err := c.make()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		err = unix.MoveMount(tree, "", unix.AT_FDCWD, c.dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("%s: move_mount: %w", c.name, err)
		}
		info, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) > 6 && f[4] == c.dst && strings.Contains(line, " shared:") {
				return fmt.Errorf("%s attached at %s is a peer of the tree it was cloned from: %s", c.name, c.dst, line)
			}
		}
	}
	return nil
}

// A second daemon beside the same socket finds the directory locked and
// keeps no files: it logs that once, its sessions have their inits' own,
// and neither its start nor its end touches the first daemon's files.
func TestSecondDaemonLeavesTheIdentityFilesAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	want := sandboxPasswd(t)
	b, dir := identityBackend(t)
	_, before := sessionPasswd(t, b)
	name := fileOf(dir, before)
	second, logs := identityBackendIn(t, dir)
	for range 2 {
		if got, st := sessionPasswd(t, second); got != want || st.Dev == before.Dev {
			t.Errorf("the second daemon's session: /etc/passwd %d:%d, holding\n%s", st.Dev, st.Ino, got)
		}
	}
	if l := logs.get(); len(l) != 1 || !strings.Contains(l[0], "another daemon's") {
		t.Errorf("the second daemon logged %q", l)
	}
	second.(io.Closer).Close()
	if got, st := sessionPasswd(t, b); got != want || st.Ino != before.Ino || fileOf(dir, st) != name {
		t.Errorf("the first daemon's session after the second's end: inode %d (was %d), holding\n%s", st.Ino, before.Ino, got)
	}
}

// A daemon that takes the directory empties it of what a daemon that died
// left, and makes it root's 0700 whatever its mode or the umask.
func TestIdentityFilesLeftAreRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	dir := filepath.Join(hostDir(t, 0o755), "identity")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(dir, "0")
	if err := os.WriteFile(left, []byte("left\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	b, _ := identityBackendIn(t, dir)
	if _, err := os.Lstat(left); err == nil {
		t.Errorf("%s, left by a daemon before, is still there", left)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Mode&0o7777 != 0o700 {
		t.Errorf("%s: mode %o (%v), want 0700", dir, st.Mode&0o7777, err)
	}
	if got, st := sessionPasswd(t, b); fileOf(dir, st) == "" || st.Mode&0o7777 != 0o444 {
		t.Errorf("/etc/passwd made under umask 077: mode %o, in %s: %q, holding\n%s", st.Mode&0o7777, dir, fileOf(dir, st), got)
	}
}

// A directory that cannot be made (a read-only mount) costs the daemon
// nothing: it starts, logs once, and each init makes its own files.
func TestIdentityFilesWhereNoneCanBeMade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	want := sandboxPasswd(t)
	parent := hostDir(t, 0o755)
	if err := unix.Mount(parent, parent, "", unix.MS_BIND, ""); err != nil {
		t.Skip(err)
	}
	defer unix.Unmount(parent, unix.MNT_DETACH)
	if err := unix.Mount("", parent, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	b, logs := identityBackendIn(t, filepath.Join(parent, "identity"))
	for range 2 {
		if got, _ := sessionPasswd(t, b); got != want {
			t.Errorf("/etc/passwd beside a read-only directory:\n%s", got)
		}
	}
	if l := logs.get(); len(l) != 1 || !strings.Contains(l[0], "read-only") {
		t.Errorf("logged %q: want the refusal once", l)
	}
}

// The daemon keeps a file while sessions use it and a few it last used
// besides; the others go, name and all, whatever number of contents it
// has seen.
func TestIdentityStoreKeepsFewFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the store's files are root's")
	}
	dir := filepath.Join(hostDir(t, 0o755), "identity")
	s := newIdentityStore(dir, t.Logf)
	defer s.close()
	held := s.take("held\n")
	if held == nil {
		t.Fatal("no file made")
	}
	var files []*identityFile
	for i := range 3 * idleIdentityFiles {
		f := s.take(fmt.Sprintf("u%d:x:%d:%d::/:/bin/sh\n", i, i, i))
		if f == nil {
			t.Fatal("no file made")
		}
		if again := s.take(f.content); again != f {
			t.Fatal("a second take of one content made another file")
		}
		s.release(map[string]*identityFile{"/etc/passwd": f, "/etc/group": f})
		files = append(files, f)
	}
	if n := len(s.files); n != idleIdentityFiles+1 {
		t.Errorf("the store keeps %d files, want %d", n, idleIdentityFiles+1)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != idleIdentityFiles+1 {
		t.Errorf("%s holds %d files, want %d", dir, len(entries), idleIdentityFiles+1)
	}
	if s.files[held.content] != held {
		t.Error("a file a session holds was let go")
	}
	if _, err := os.Lstat(filepath.Join(dir, files[0].name)); err == nil {
		t.Error("the least recently used file is still there")
	}
	if s.take(files[len(files)-1].content) != files[len(files)-1] {
		t.Error("the last file used was made anew")
	}
}

// A session gives its files back as it ends, and a launch refused once it
// took them (here by the planner: children.allow without a session
// socket) gives them back too.
func TestSessionReleasesItsIdentityFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a daemon that is not root shares no identity files")
	}
	b, _ := identityBackend(t)
	if _, _, st := runWith(t, b, nil, "/bin/true"); st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	wantReleased(t, b.(*backend).identities)
	p, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Children: &sandboxdv1.Children{Allow: true}}, "/bin/true"))
	wantRefusal(t, p, err, "children.allow")
	wantReleased(t, b.(*backend).identities)
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
