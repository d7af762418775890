package launcherwindows

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestJournalMissingFileIsEmpty(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if p := j.Persistent(); len(p) != 0 {
		t.Errorf("Persistent() = %v, want none", p)
	}
	if s := j.Sessions(); len(s) != 0 {
		t.Errorf("Sessions() = %v, want none", s)
	}
}

// TestJournalSurvivesTheDaemon: what one daemon recorded is what the next
// one reads, which is the whole point of the journal.
func TestJournalSurvivesTheDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	root := StampedACE{Path: `C:\work`, SID: "S-1-5-21-1-2-3-1001", Allow: true, Mask: 0x1301bf, Inherit: true}
	deny := StampedACE{Path: `C:\work\.env`, SID: "S-1-5-5-0-123456", Mask: 0x1f01ff, Inherit: true}
	journalOK(t, j.RecordPersistent(root))
	journalOK(t, j.BeginSession("s1", `C:\ProgramData\sandboxd\tmp\s1`))
	journalOK(t, j.RecordPlaceholders("s1", []string{`C:\work\.env`}))
	journalOK(t, j.RecordSessionACE("s1", deny))

	again, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Persistent(); !reflect.DeepEqual(got, []StampedACE{root}) {
		t.Errorf("Persistent() = %v, want %v", got, []StampedACE{root})
	}
	want := map[string]SessionRecord{"s1": {
		TempDir:      `C:\ProgramData\sandboxd\tmp\s1`,
		ACEs:         []StampedACE{deny},
		Placeholders: []string{`C:\work\.env`},
	}}
	if got := again.Sessions(); !reflect.DeepEqual(got, want) {
		t.Errorf("Sessions() = %+v, want %+v", got, want)
	}
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Errorf("temporary file %s.new left behind: %v", path, err)
	}
}

func TestJournalPersistentIsASet(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	a := StampedACE{Path: `C:\work`, SID: "S-1-15-3-1024-1", Allow: true, Mask: 1, Inherit: true}
	b := a
	b.Path = `C:\other`
	journalOK(t, j.RecordPersistent(a))
	journalOK(t, j.RecordPersistent(a))
	journalOK(t, j.RecordPersistent(b))
	if got := j.Persistent(); !reflect.DeepEqual(got, []StampedACE{a, b}) {
		t.Fatalf("Persistent() = %v, want %v", got, []StampedACE{a, b})
	}
	journalOK(t, j.ForgetPersistent(a))
	if got := j.Persistent(); !reflect.DeepEqual(got, []StampedACE{b}) {
		t.Errorf("after ForgetPersistent: %v, want %v", got, []StampedACE{b})
	}
}

// TestJournalKeepsWhatTheUndoLeft: a session whose undo failed in part
// stays recorded with what is left, so that the next sweep retries it;
// one fully undone is gone.
func TestJournalKeepsWhatTheUndoLeft(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	a := StampedACE{Path: `C:\work\.env`, SID: "S-1-5-5-0-1", Mask: 0x1f01ff, Inherit: true}
	journalOK(t, j.BeginSession("s1", `C:\t\s1`))
	journalOK(t, j.RecordSessionACE("s1", a))
	journalOK(t, j.BeginSession("s2", `C:\t\s2`))

	journalOK(t, j.FinishSession("s1", SessionRecord{ACEs: []StampedACE{a}}))
	journalOK(t, j.FinishSession("s2", SessionRecord{}))
	again, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]SessionRecord{"s1": {ACEs: []StampedACE{a}}}
	if got := again.Sessions(); !reflect.DeepEqual(got, want) {
		t.Errorf("Sessions() = %+v, want %+v", got, want)
	}
}

func TestJournalRefusesUnknownSessionsAndDuplicates(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordSessionACE("nope", StampedACE{}); err == nil {
		t.Error("RecordSessionACE for an unknown session succeeded")
	}
	if err := j.RecordPlaceholders("nope", []string{`C:\x`}); err == nil {
		t.Error("RecordPlaceholders for an unknown session succeeded")
	}
	journalOK(t, j.BeginSession("s1", ""))
	if err := j.BeginSession("s1", ""); err == nil {
		t.Error("a second BeginSession for the same session succeeded")
	}
}

// TestJournalUnchangedWhenTheWriteFails: the journal in memory must not
// claim what the file does not say.
func TestJournalUnchangedWhenTheWriteFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	journalOK(t, os.Mkdir(dir, 0o700))
	j, err := OpenJournal(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	journalOK(t, os.Remove(dir))
	if err := j.RecordPersistent(StampedACE{Path: `C:\work`}); err == nil {
		t.Fatal("RecordPersistent succeeded without a directory to write to")
	}
	if p := j.Persistent(); len(p) != 0 {
		t.Errorf("Persistent() = %v after a failed write, want none", p)
	}
}

func TestJournalRefusesOtherVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	journalOK(t, os.WriteFile(path, []byte(`{"version": 2}`), 0o600))
	_, err := OpenJournal(path)
	if err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("OpenJournal of a version 2 file: %v, want a version error", err)
	}
	journalOK(t, os.WriteFile(path, []byte(`{`), 0o600))
	if _, err := OpenJournal(path); err == nil {
		t.Error("OpenJournal of a torn file succeeded")
	}
}

func journalOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A persistent grant to a sandbox user, as earlier versions stamped on
// every write root, is stale; entries for a write root's own SID or
// OWNER RIGHTS are not (issue 29 item 2).
func TestStaleGrants(t *testing.T) {
	user := "S-1-5-21-1-2-3-1001"
	grant := StampedACE{Path: `C:\w`, SID: user, Allow: true, Mask: ModifyAccess &^ DELETE, Inherit: true}
	root := StampedACE{Path: `C:\w`, SID: WriteRootSID(`C:\w`), Allow: true, Mask: ModifyAccess, Inherit: true}
	owner := StampedACE{Path: `C:\w`, SID: SIDOwnerRights, Allow: true, Mask: READ_CONTROL, Inherit: true}
	got := StaleGrants([]StampedACE{grant, root, owner}, []string{user, "S-1-5-21-1-2-3-1002"})
	if len(got) != 1 || got[0] != grant {
		t.Errorf("stale grants %+v, want only the grant to the sandbox user", got)
	}
}
