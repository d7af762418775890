package launcherwindows

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
)

// journalVersion is the format of the journal file; a file of another
// version is refused rather than misread, since the sweep acts on it.
const journalVersion = 1

// StampedACE names one access control entry the backend added to the DACL
// of a path, precisely enough to find and remove that entry again.
type StampedACE struct {
	Path string `json:"path"`
	// SID is the trustee as a SID string, the logon SID already
	// substituted.
	SID     string `json:"sid"`
	Allow   bool   `json:"allow"`
	Mask    uint32 `json:"mask"`
	Inherit bool   `json:"inherit"`
}

// SessionRecord is what one session changed on the host that must be
// undone when it ends.
type SessionRecord struct {
	// TempDir is the session's private temporary directory.
	TempDir string `json:"temp_dir,omitempty"`
	// ACEs are the per-session entries, in the order they were stamped.
	ACEs []StampedACE `json:"aces,omitempty"`
	// Placeholders are the directories made for the carve-outs and deny
	// paths the session holds, each placeholder's deepest first.
	Placeholders []string `json:"placeholders,omitempty"`
}

// Empty reports whether nothing of the session is left to undo.
func (r SessionRecord) Empty() bool {
	return r.TempDir == "" && len(r.ACEs) == 0 && len(r.Placeholders) == 0
}

type journalFile struct {
	Version int `json:"version"`
	// Persistent are the entries left in place across sessions, which
	// only uninstall removes.
	Persistent []StampedACE              `json:"persistent,omitempty"`
	Sessions   map[string]*SessionRecord `json:"sessions,omitempty"`
}

// Journal is the backend's record in its state directory of what it
// changed on the host: a daemon that dies cannot undo its sessions'
// changes, so the next one finds them here and sweeps them, and uninstall
// finds the persistent entries every daemon left. Every change is written
// before the host is changed, so a crash between the two leaves an entry
// whose undo finds nothing rather than a change nobody knows of.
type Journal struct {
	path string

	mu sync.Mutex
	f  journalFile
}

// OpenJournal reads the journal at path; a missing file is an empty
// journal.
func OpenJournal(path string) (*Journal, error) {
	j := &Journal{path: path, f: journalFile{Version: journalVersion}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &j.f); err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	if j.f.Version != journalVersion {
		return nil, fmt.Errorf("read journal %s: version %d, this sandboxd reads version %d", path, j.f.Version, journalVersion)
	}
	return j, nil
}

// Path is where the journal is kept.
func (j *Journal) Path() string { return j.path }

// save replaces the file as a whole: a crash leaves the old journal or the
// new one, never a torn one. j.mu is held.
func (j *Journal) save() error {
	b, err := json.MarshalIndent(&j.f, "", "\t")
	if err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	tmp := j.path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	return nil
}

// update applies change to the journal and writes it; a failed write
// leaves the journal in memory as it was.
func (j *Journal) update(change func(f *journalFile)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	old := j.f.clone()
	change(&j.f)
	if err := j.save(); err != nil {
		j.f = old
		return err
	}
	return nil
}

func (f journalFile) clone() journalFile {
	c := journalFile{Version: f.Version, Persistent: slices.Clone(f.Persistent)}
	if f.Sessions != nil {
		c.Sessions = make(map[string]*SessionRecord, len(f.Sessions))
		for id, r := range f.Sessions {
			c.Sessions[id] = r.clone()
		}
	}
	return c
}

func (r *SessionRecord) clone() *SessionRecord {
	return &SessionRecord{TempDir: r.TempDir, ACEs: slices.Clone(r.ACEs), Placeholders: slices.Clone(r.Placeholders)}
}

// RecordPersistent notes an entry that stays after its session; noting
// one already there changes nothing.
func (j *Journal) RecordPersistent(a StampedACE) error {
	j.mu.Lock()
	known := slices.Contains(j.f.Persistent, a)
	j.mu.Unlock()
	if known {
		return nil
	}
	return j.update(func(f *journalFile) {
		if !slices.Contains(f.Persistent, a) {
			f.Persistent = append(f.Persistent, a)
		}
	})
}

// ForgetPersistent drops an entry that has been removed from the host.
func (j *Journal) ForgetPersistent(a StampedACE) error {
	return j.update(func(f *journalFile) {
		f.Persistent = slices.DeleteFunc(f.Persistent, func(b StampedACE) bool { return b == a })
	})
}

// Persistent returns the entries that stay after their sessions.
func (j *Journal) Persistent() []StampedACE {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.f.Persistent)
}

// BeginSession notes a session and its temporary directory before either
// exists on the host.
func (j *Journal) BeginSession(id, tempDir string) error {
	j.mu.Lock()
	_, dup := j.f.Sessions[id]
	j.mu.Unlock()
	if dup {
		return fmt.Errorf("journal %s: session %q is already recorded", j.path, id)
	}
	return j.update(func(f *journalFile) {
		if f.Sessions == nil {
			f.Sessions = map[string]*SessionRecord{}
		}
		f.Sessions[id] = &SessionRecord{TempDir: tempDir}
	})
}

// RecordSessionACE notes a per-session entry before it is stamped.
func (j *Journal) RecordSessionACE(id string, a StampedACE) error {
	return j.updateSession(id, func(r *SessionRecord) { r.ACEs = append(r.ACEs, a) })
}

// RecordPlaceholders notes the directories of a placeholder the session
// holds, deepest first, before they are made.
func (j *Journal) RecordPlaceholders(id string, dirs []string) error {
	return j.updateSession(id, func(r *SessionRecord) {
		for _, d := range dirs {
			if !slices.Contains(r.Placeholders, d) {
				r.Placeholders = append(r.Placeholders, d)
			}
		}
	})
}

func (j *Journal) updateSession(id string, change func(r *SessionRecord)) error {
	j.mu.Lock()
	_, ok := j.f.Sessions[id]
	j.mu.Unlock()
	if !ok {
		return fmt.Errorf("journal %s: session %q is not recorded", j.path, id)
	}
	return j.update(func(f *journalFile) { change(f.Sessions[id]) })
}

// Sessions returns a copy of every session still recorded.
func (j *Journal) Sessions() map[string]SessionRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[string]SessionRecord, len(j.f.Sessions))
	for id, r := range j.f.Sessions {
		out[id] = *r.clone()
	}
	return out
}

// FinishSession replaces what is recorded of a session by left, what its
// undo could not remove, so that the next sweep tries again; the session
// is dropped when nothing is left.
func (j *Journal) FinishSession(id string, left SessionRecord) error {
	return j.update(func(f *journalFile) {
		if left.Empty() {
			delete(f.Sessions, id)
			return
		}
		if f.Sessions == nil {
			f.Sessions = map[string]*SessionRecord{}
		}
		f.Sessions[id] = left.clone()
	})
}

// StaleGrants are the persistent entries, among those journaled, that
// grant something to one of the sandbox users: versions before this one
// granted each write root to the user for good, which every later
// session of that user, whoever its caller, inherited. The daemon
// removes them at start.
func StaleGrants(persistent []StampedACE, userSIDs []string) []StampedACE {
	var out []StampedACE
	for _, a := range persistent {
		if a.Allow && slices.Contains(userSIDs, a.SID) {
			out = append(out, a)
		}
	}
	return out
}
