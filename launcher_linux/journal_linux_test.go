package launcherlinux

import (
	"os"
	"path/filepath"
	"slices"
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

// A forgotten entry's file is rewritten for the next entry rather than a
// new file made, and a daemon started after a crash still removes what the
// entries name, not the spares.
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
	name := j.record(entryPlaceholder, []string{ph})
	if name == "" {
		t.Fatal("record wrote no entry")
	}
	j.forget(name)
	files := journalFiles(t, j.dir)
	if len(files) != 1 || files[0] == name {
		t.Fatalf("after forget: %q, want one spare file", files)
	}
	again := j.record(entryPlaceholder, []string{ph})
	if got := journalFiles(t, j.dir); !slices.Equal(got, []string{again}) {
		t.Fatalf("after a second record: %q, want only the entry %q (the spare rewritten)", got, again)
	}
	other := j.record(entryPlaceholder, []string{ph + "-other"})
	j.forget(other)
	// The daemon dies here: its lock goes with it, its entry and spare stay.
	j.lock.Close()
	j2, cleaned, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.lock.Close()
	if _, err := os.Lstat(ph); err == nil || !slices.Contains(cleaned, entryPlaceholder+" "+ph) {
		t.Errorf("a new daemon left the placeholder of an entry: cleaned %q", cleaned)
	}
	// Its spares are gone; the entry it cleaned is this daemon's one spare.
	if got := journalFiles(t, j2.dir); !slices.Equal(got, []string{spareEntry + "1"}) {
		t.Errorf("journal after restart: %q, want only %q", got, spareEntry+"1")
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
