package launcherlinux

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
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
