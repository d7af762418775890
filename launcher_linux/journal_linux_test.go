package launcherlinux

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	j, _, _, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	ph := filepath.Join(t.TempDir(), "ph")
	if err := os.Mkdir(ph, 0o755); err != nil {
		t.Fatal(err)
	}
	long := j.record(placeholderEntry(ph+"/a/much/longer/path/than/the/next/entry/has", make([]dirID, 8)))
	if long == "" {
		t.Fatal("record wrote no entry")
	}
	j.forget(long)
	name := j.record(placeholderEntry(ph, madeDirIDs(ph, 1)))
	if got := journalFiles(t, j.dir); name != long || !slices.Equal(got, []string{name}) {
		t.Fatalf("after forget and a second record: entry %q, files %q, want the slot %q rewritten", name, got, long)
	}
	// More entries at once than the journal keeps files open for: the
	// ones beyond are closed and opened again to be blanked.
	var many []string
	for i := range maxSlotFiles + 3 {
		many = append(many, j.record(placeholderEntry(filepath.Join(ph+"-gone", strconv.Itoa(i)), make([]dirID, 1))))
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
	j2, cleaned, _, err := openJournal(state)
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
	j, _, _, err := openJournal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer j.lock.Close()
	e := placeholderEntry("/nonexistent/placeholder", make([]dirID, 1))
	for b.Loop() {
		j.forget(j.record(e))
	}
}

// A journal entry is a file the next daemon obeys, as root for a root
// daemon: one written by anyone else, or left by a daemon that died and
// outdated since, must not make it remove more than the daemon made.
// Each victim below is an empty directory (what removal takes) that an
// entry names; only a placeholder directory that still is the one the
// daemon made (its device and inode) is removed, never through a symlink,
// and only if still empty. An entry from before Made says nothing of
// what the daemon made, and what it names is left. A device and inode
// are not secret: a foreign entry can still name an empty directory its
// writer looked at (a placeholder is an empty directory the daemon does
// not mark), which is why the journal's directory must be the daemon's
// alone (TestJournalRefusesAStateDirNotItsOwn). Every entry names
// only the test's own directories: run against a journal that obeys
// them, an entry naming "/" removed every empty directory on the host.
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
	mkdirs(dir, v("tree/a/b"), v("sandboxd-1/a/b"), v("deep/x/empty"), v("real/empty"), v("dots/a"), v("dots/b"), v("linked/empty"), v("own/a/b"), v("full/kept"), v("old/single"), v("old/chain/a"), v("other"), v("wrong"), v("unseen"))
	if err := os.Symlink(v("real"), v("link")); err != nil {
		t.Fatal(err)
	}
	id := func(rel string) dirID { return madeDirIDs(v(rel), 1)[0] }
	entry := func(name string, e journalEntry) {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry("entry-1", journalEntry{Kind: entryCgroup, Path: []byte(v("tree"))})
	entry("entry-2", journalEntry{Kind: entryCgroup, Path: []byte(v("sandboxd-1"))})
	// More directories made than the path has names, each the one
	// there: it would reach "/", removing every empty one on the way.
	entry("entry-3", placeholderEntry(v("deep/x/empty"), madeDirIDs(v("deep/x/empty"), strings.Count(v("deep/x/empty"), "/")+1)))
	entry("entry-4", placeholderEntry(v("link/empty"), []dirID{id("real/empty")}))
	entry("entry-5", placeholderEntry(victims+"/dots/a/../b", []dirID{id("dots/b")}))
	// Removed only if empty, so "full" stays.
	entry("entry-6", placeholderEntry(v("full"), []dirID{id("full")}))
	// An entry file that is a symlink to one written elsewhere.
	elsewhere := filepath.Join(t.TempDir(), "entry")
	b, _ := json.Marshal(placeholderEntry(v("linked/empty"), []dirID{id("linked/empty")}))
	if err := os.WriteFile(elsewhere, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "entry-7")); err != nil {
		t.Fatal(err)
	}
	// The daemon's own: a placeholder and the parent made for it.
	entry("entry-8", placeholderEntry(v("own/a/b"), madeDirIDs(v("own/a/b"), 2)))
	// Entries of a daemon from before Made: a one-path placeholder, and
	// a chain of directories.
	entry("entry-9", journalEntry{Kind: entryPlaceholder, Paths: []string{v("old/single")}})
	entry("entry-10", journalEntry{Kind: entryPlaceholder, Paths: []string{v("old/chain/a"), v("old/chain")}})
	// Another directory's identity, and none: the daemon died before it
	// saw the directory made.
	entry("entry-11", placeholderEntry(v("wrong"), []dirID{id("other")}))
	entry("entry-12", placeholderEntry(v("unseen"), make([]dirID, 1)))

	j, cleaned, left, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j.lock.Close()
	for _, p := range []string{"tree/a/b", "sandboxd-1/a/b", "deep/x/empty", "real/empty", "dots/b", "linked/empty", "full/kept", "old/single", "old/chain/a", "wrong", "unseen"} {
		if _, err := os.Lstat(v(p)); err != nil {
			t.Errorf("an entry removed %s, which the daemon did not make: %v", v(p), err)
		}
	}
	if want := []string{entryPlaceholder + " " + v("own/a/b"), entryPlaceholder + " " + v("own/a")}; !slices.Equal(cleaned, want) {
		t.Errorf("cleaned %q, want %q", cleaned, want)
	}
	for _, p := range []string{"full", "link/empty", "old/single", "old/chain/a", "old/chain", "wrong", "unseen"} {
		if !slices.ContainsFunc(left, func(l string) bool { return strings.HasPrefix(l, entryPlaceholder+" "+v(p)+" (") }) {
			t.Errorf("%s is not among what the start says it left: %q", v(p), left)
		}
	}
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("journal after start: %q, want the entries dropped too", got)
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
	j, _, _, err := openJournal(state)
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
		if j, _, _, err := openJournal(state); err == nil {
			j.lock.Close()
			t.Errorf("state directory %s: the journal opened, want a refusal", state)
		}
	}
	if _, err := os.Lstat(victim); err != nil {
		t.Errorf("a file where a symlinked journal led was removed: %v", err)
	}
}

// A deep placeholder's entry must come back whole at the next start,
// not be taken for a write cut short and dropped with the placeholders
// it names left in the workspace.
func TestDeepPlaceholderEntryIsObeyed(t *testing.T) {
	p := t.TempDir()
	for len(p) < 3800 {
		p += "/d"
	}
	wantPlaceholderRemovedAtNextStart(t, p)
}

// A placeholder whose name is not UTF-8 is removed at the next start: a
// JSON string of its path held U+FFFD instead of each byte that is not,
// and named nothing there.
func TestPlaceholderNotUTF8IsRemoved(t *testing.T) {
	wantPlaceholderRemovedAtNextStart(t, filepath.Join(t.TempDir(), "a\xff\xfe", "\x80b"))
}

// wantPlaceholderRemovedAtNextStart records placeholder p, beneath a
// directory of the test's, as the backend does (an entry, the init making
// the directories, their identities seen), then starts a journal as a
// daemon that died would be followed by one: p and the directory made for
// it above must be gone.
func wantPlaceholderRemovedAtNextStart(t *testing.T, p string) {
	t.Helper()
	state := t.TempDir()
	j, _, _, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	made := missingDirs(p)
	name := j.record(placeholderEntry(p, make([]dirID, len(made))))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	j.replace(name, placeholderEntry(p, madeDirIDs(p, len(made))))
	// The daemon dies with the placeholder made.
	j.lock.Close()
	j.fd.Close()
	j, cleaned, left, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j.lock.Close()
	if top := made[len(made)-1]; lexists(top) {
		t.Errorf("the next start left the placeholder (removed %d of its %d directories; left %q)", len(cleaned), len(made), left)
	}
}

// The identities seen once the init made a placeholder go in an entry of
// their own before the entry without them is forgotten, not over it: a
// crash in the middle of rewriting an entry longer than a page left text
// that is not JSON, which the next start dropped as a write that never
// finished, with the directories on the host unlogged. A crash before
// the old entry is forgotten leaves both, and the next start still
// removes the placeholder.
func TestJournalReplaceWritesANewEntry(t *testing.T) {
	state := t.TempDir()
	j, _, _, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	p := t.TempDir()
	for len(p) < 3800 {
		p += "/d"
	}
	made := missingDirs(p)
	old := j.record(placeholderEntry(p, make([]dirID, len(made))))
	if old == "" {
		t.Fatal("record wrote no entry")
	}
	before, err := os.ReadFile(filepath.Join(j.dir, old))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if name := j.replace(old, placeholderEntry(p, madeDirIDs(p, len(made)))); name == old || name == "" {
		t.Fatalf("replace wrote the identities over the entry %q (got %q), where a crash would tear it", old, name)
	}
	// The daemon dies before the old entry is blanked.
	if err := os.WriteFile(filepath.Join(j.dir, old), before, 0o600); err != nil {
		t.Fatal(err)
	}
	j.lock.Close()
	j.fd.Close()
	j, _, left, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j.lock.Close()
	if top := made[len(made)-1]; lexists(top) {
		t.Errorf("with both entries, the next start left the placeholder (left %q)", left)
	}
}
