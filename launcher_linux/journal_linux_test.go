package launcherlinux

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if de.Name() != ".lock" {
			names = append(names, de.Name())
		}
	}
	return names
}

// A forgotten entry's slot is rewritten for the next entry rather than a
// new file made, a shorter entry over a longer one still reads back whole,
// and a daemon started after a crash removes what the live entries name,
// not what forgotten ones did, and every slot file.
func TestJournalReusesForgottenEntries(t *testing.T) {
	state := t.TempDir()
	j, _, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	ph := filepath.Join(t.TempDir(), "ph")
	if err := os.Mkdir(ph, 0o755); err != nil {
		t.Fatal(err)
	}
	long := j.record(entryPlaceholder, []string{ph + "/a/much/longer/path/than/the/next/entry/has", ph + "/a/much"})
	if long == "" {
		t.Fatal("record wrote no entry")
	}
	j.forget(long)
	name := j.record(entryPlaceholder, []string{ph})
	if got := journalFiles(t, j.dir); name != long || !slices.Equal(got, []string{name}) {
		t.Fatalf("after forget and a second record: entry %q, files %q, want the slot %q rewritten", name, got, long)
	}
	// More entries at once than the journal keeps files open for: the
	// ones beyond are closed and opened again to be blanked.
	var many []string
	for i := range maxSlotFiles + 3 {
		many = append(many, j.record(entryPlaceholder, []string{filepath.Join(ph+"-gone", strconv.Itoa(i))}))
	}
	for _, e := range many {
		if e == "" {
			t.Fatal("record wrote no entry")
		}
		j.forget(e)
	}
	// The daemon dies here: its lock goes with it, its entry and free
	// slots stay.
	j.lock.Close()
	j2, cleaned, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.lock.Close()
	if _, err := os.Lstat(ph); err == nil || !slices.Equal(cleaned, []string{entryPlaceholder + " " + ph}) {
		t.Errorf("a new daemon did not remove just the placeholder of the live entry: cleaned %q", cleaned)
	}
	if got := journalFiles(t, j2.dir); len(got) != 0 {
		t.Errorf("journal after restart: %q, want no files", got)
	}
}

// BenchmarkJournalEntry is what a launch holding a placeholder spends on
// its journal entry, recorded and forgotten.
func BenchmarkJournalEntry(b *testing.B) {
	j, _, err := openJournal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer j.lock.Close()
	paths := []string{"/nonexistent/placeholder"}
	for b.Loop() {
		j.forget(j.record(entryPlaceholder, paths))
	}
}

// A journal entry is a file the next daemon obeys, as root for a root
// daemon: one written by anyone else must not make it remove more than
// the daemon's own kind of entry can. Each victim below is an empty
// directory (what removal takes) that a tampered entry names; only a
// chain of placeholder directories is removed, never through a symlink,
// and only what is still empty. That much a foreign entry can still do
// (a placeholder is an empty directory the daemon does not mark), which
// is why the journal's directory must be the daemon's alone
// (TestJournalRefusesAStateDirNotItsOwn). Every entry names only the
// test's own directories: run against a journal that obeys them, an
// entry naming "/" removed every empty directory on the host.
func TestTamperedJournalRemovesNothingElse(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, journalDir)
	victims := t.TempDir()
	mkdirs := func(paths ...string) {
		for _, p := range paths {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	v := func(rel string) string { return filepath.Join(victims, rel) }
	mkdirs(dir, v("tree/a/b"), v("sandboxd-1/a/b"), v("chain/x/empty"), v("other-empty"), v("real/empty"), v("dots/a"), v("dots/b"), v("linked/empty"), v("own/a/b"), v("full/kept"), v("single"))
	if err := os.Symlink(v("real"), v("link")); err != nil {
		t.Fatal(err)
	}
	entry := func(name, kind string, paths ...string) {
		b, err := json.Marshal(journalEntry{Kind: kind, Paths: paths})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry("entry-1", entryCgroup, v("tree"))
	entry("entry-2", entryCgroup, v("sandboxd-1"))
	entry("entry-3", entryPlaceholder, v("chain/x/empty"), v("other-empty"))
	entry("entry-4", entryPlaceholder, v("link/empty"))
	entry("entry-5", entryPlaceholder, victims+"/dots/a/../b")
	// One path, as a placeholder whose parent was there: removed only if
	// empty, so "full" stays and "single" goes.
	entry("entry-6", entryPlaceholder, v("full"))
	entry("entry-9", entryPlaceholder, v("single"))
	// An entry file that is a symlink to one written elsewhere.
	elsewhere := filepath.Join(t.TempDir(), "entry")
	b, _ := json.Marshal(journalEntry{Kind: entryPlaceholder, Paths: []string{v("linked/empty")}})
	if err := os.WriteFile(elsewhere, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "entry-7")); err != nil {
		t.Fatal(err)
	}
	// The daemon's own: a placeholder and the parent made for it.
	entry("entry-8", entryPlaceholder, v("own/a/b"), v("own/a"))

	j, cleaned, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j.lock.Close()
	for _, p := range []string{"tree/a/b", "sandboxd-1/a/b", "chain/x/empty", "other-empty", "real/empty", "dots/b", "linked/empty", "full/kept"} {
		if _, err := os.Lstat(v(p)); err != nil {
			t.Errorf("a tampered entry removed %s: %v", v(p), err)
		}
	}
	if _, err := os.Lstat(v("own/a")); err == nil {
		t.Errorf("the daemon's own placeholder entry was not removed")
	}
	if _, err := os.Lstat(v("single")); err == nil {
		t.Errorf("an empty directory a one-path placeholder entry names was not removed")
	}
	if want := []string{entryPlaceholder + " " + v("own/a/b"), entryPlaceholder + " " + v("own/a"), entryPlaceholder + " " + v("single")}; !slices.Equal(cleaned, want) {
		t.Errorf("cleaned %q, want %q", cleaned, want)
	}
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("journal after start: %q, want the tampered entries dropped too", got)
	}
}

// What the journal never makes in its directory (a directory, a FIFO),
// put there by anyone, is dropped at start: before, reading a directory
// named like an entry failed every later start of the daemon.
func TestJournalDropsWhatIsNotAFile(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, journalDir)
	if err := os.MkdirAll(filepath.Join(dir, "entry-0"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "entry-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, _, err := openJournal(state)
	if err != nil {
		t.Fatalf("start with a directory and a FIFO among the entries: %v", err)
	}
	defer j.lock.Close()
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("journal after start: %q, want them dropped", got)
	}
}

// The state directory and the journal's are the daemon's alone: a symlink
// there (whose target clean would remove files in), or one another uid
// owns or may write to, is refused at start, its target untouched.
func TestJournalRefusesAStateDirNotItsOwn(t *testing.T) {
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, "entry-1")
	if err := os.WriteFile(victim, []byte("   "), 0o600); err != nil {
		t.Fatal(err)
	}
	linkedState := filepath.Join(t.TempDir(), "state")
	linkedJournal := t.TempDir()
	writable := t.TempDir()
	for _, err := range []error{
		os.Symlink(elsewhere, linkedState),
		os.Symlink(elsewhere, filepath.Join(linkedJournal, journalDir)),
		os.Chmod(writable, 0o777),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, state := range []string{linkedState, linkedJournal, writable} {
		if j, _, err := openJournal(state); err == nil {
			j.lock.Close()
			t.Errorf("state directory %s: the journal opened, want a refusal", state)
		}
	}
	if _, err := os.Lstat(victim); err != nil {
		t.Errorf("a file where a symlinked journal led was removed: %v", err)
	}
}

// A placeholder's entry grows with the square of its depth (each
// directory made is listed): a deep one the daemon wrote must come back
// whole at its next start, not be taken for a write cut short and
// dropped with the placeholders it names left in the workspace.
func TestDeepPlaceholderEntryIsObeyed(t *testing.T) {
	state := t.TempDir()
	root := t.TempDir()
	p := root
	for len(p) < 3800 {
		p += "/d"
	}
	j, _, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	j.record(entryPlaceholder, missingDirs(p))
	// The daemon dies with the placeholder made.
	j.lock.Close()
	j.fd.Close()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	j, cleaned, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j.lock.Close()
	if _, err := os.Lstat(filepath.Join(root, "d")); err == nil {
		t.Errorf("the next start left the placeholder (removed %d of its directories)", len(cleaned))
	}
}
