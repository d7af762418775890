package launcherlinux

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// With PlaceholderLinger, the placeholder the last session left stays
// for the next session, which covers it as it is instead of making it
// again, and is still as unwritable to it; Close removes it once no
// session uses it.
func TestPlaceholderLingersForTheNextSession(t *testing.T) {
	w := hostDir(t, 0o777)
	b, session := lingering(t, "", w, w+"/.git", time.Hour)
	inode := func() uint64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(w+"/.git", &st); err != nil {
			t.Fatalf("placeholder after the session: %v", err)
		}
		return st.Ino
	}
	if out := session(); out != "denied\n" {
		t.Fatalf("first session: %q", out)
	}
	first := inode()
	if out := session(); out != "denied\n" {
		t.Fatalf("session on the lingering placeholder: %q", out)
	}
	if inode() != first {
		t.Error("the placeholder was made again for the second session")
	}
	b.(interface{ Close() error }).Close()
	if _, err := os.Lstat(w + "/.git"); err == nil {
		t.Errorf("placeholder %s/.git left behind by Close", w)
	}
}

// Once no session has held it for PlaceholderLinger, the placeholder goes.
func TestPlaceholderLingerEnds(t *testing.T) {
	w := hostDir(t, 0o777)
	b, session := lingering(t, "", w, w+"/.git", time.Millisecond)
	defer b.(interface{ Close() error }).Close()
	for range 3 {
		if out := session(); out != "denied\n" {
			t.Fatalf("session: %q", out)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(w + "/.git"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("placeholder %s/.git still there 30 s after its linger", w)
		}
	}
}

// A placeholder removed during its linger, with a parent the daemon did
// not make, is made again by the next session with that parent: the
// daemon removes the parent with it, as it would have had the first
// session made both.
func TestPlaceholderRemovedDuringLingerIsReplanned(t *testing.T) {
	w := hostDir(t, 0o777)
	// Writable to the sandbox: else it could not make .git either, and
	// there would be no placeholder to make.
	if err := os.Mkdir(w+"/sub", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w+"/sub", 0o777); err != nil {
		t.Fatal(err)
	}
	b, session := lingering(t, "", w, w+"/sub/.git", time.Hour)
	if out := session(); out != "denied\n" {
		t.Fatalf("first session: %q", out)
	}
	if err := os.Remove(w + "/sub/.git"); err != nil {
		t.Fatalf("removing the lingering placeholder: %v", err)
	}
	if err := os.Remove(w + "/sub"); err != nil {
		t.Fatal(err)
	}
	if out := session(); out != "denied\n" {
		t.Fatalf("session after the removal: %q", out)
	}
	b.(interface{ Close() error }).Close()
	if _, err := os.Lstat(w + "/sub"); err == nil {
		t.Errorf("%s/sub, made for the second session's placeholder, left behind by Close", w)
	}
}

// A placeholder whose directory was seen made is removed at the end of
// its linger only if it still is that directory: one the user made in its
// place since (empty, as a placeholder is) stays.
func TestPlaceholderReplacedDuringLingerIsLeft(t *testing.T) {
	w := hostDir(t, 0o777)
	b, session := lingering(t, t.TempDir(), w, w+"/.git", time.Hour)
	if out := session(); out != "denied\n" {
		t.Fatalf("session: %q", out)
	}
	// Made before the placeholder goes, so it cannot get its inode.
	if err := os.Mkdir(w+"/.mine", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(w + "/.git"); err != nil {
		t.Fatalf("removing the lingering placeholder: %v", err)
	}
	if err := os.Rename(w+"/.mine", w+"/.git"); err != nil {
		t.Fatal(err)
	}
	b.(interface{ Close() error }).Close()
	if _, err := os.Lstat(w + "/.git"); err != nil {
		t.Errorf("the user's directory in the placeholder's place was removed: %v", err)
	}
}

// Once a session's init has made a placeholder, and the parent missing
// for it, its journal entry names their identities, which the next start
// needs to remove them: with none it leaves them.
func TestPlaceholderEntryHasTheMadeDirectories(t *testing.T) {
	w := hostDir(t, 0o777)
	state := t.TempDir()
	p := w + "/sub/.git"
	b, session := lingering(t, state, w, p, time.Hour)
	defer b.(interface{ Close() error }).Close()
	if out := session(); out != "denied\n" {
		t.Fatalf("session: %q", out)
	}
	want := madeDirIDs(p, 2)
	if slices.Contains(want, dirID{}) {
		t.Fatalf("the session made no placeholder: %v", want)
	}
	var entries []journalEntry
	for _, name := range journalFiles(t, filepath.Join(state, journalDir)) {
		b, err := os.ReadFile(filepath.Join(state, journalDir, name))
		if err != nil {
			t.Fatal(err)
		}
		var e journalEntry
		if len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &e) == nil {
			entries = append(entries, e)
		}
	}
	if len(entries) != 1 || string(entries[0].Path) != p || !slices.Equal(entries[0].Made, want) {
		t.Errorf("journal entries %+v, want one for %s made %v", entries, p, want)
	}
}

// lingering is a backend of its own with PlaceholderLinger d, its journal
// in state ("" for none), and a session under it that tries to write
// beneath the carve-out carve.
func lingering(t *testing.T, state, w, carve string, d time.Duration) (launcher.Backend, func() string) {
	t.Helper()
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, ReadOnly: []string{carve}}}
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, InitPath: initBinaryPath(t), PlaceholderLinger: d, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	session := func() string {
		t.Helper()
		out, _, st := runWith(t, b, pol, "/bin/sh", "-c", "mkdir "+carve+"/hooks 2>/dev/null && echo WROTE || echo denied")
		if st.ExitCode != 0 {
			t.Fatalf("status %+v", st)
		}
		return out
	}
	return b, session
}
