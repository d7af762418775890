package launcherlinux

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// journal records in the state directory what the backend makes on the
// host and removes when sessions end: placeholder directories in users'
// write roots and the daemon's cgroups. A daemon killed before it could
// remove them leaves its entries, and the next one removes what they name
// when it starts. An entry is one file, written before what it names is
// relied on and removed after what it names is, so a crash at any point
// leaves at worst an entry for something already gone.
type journal struct {
	dir string
	// lock is held while the daemon runs: the entries are its own, and a
	// second daemon on the same state directory must not clean them.
	lock *os.File
}

// journalDir is the journal's directory under the state directory.
const journalDir = "launcher-journal"

// Kinds of entries.
const (
	entryPlaceholder = "placeholder"
	entryCgroup      = "cgroup"
)

type journalEntry struct {
	Kind string `json:"kind"`
	// Paths are the directories to remove, in order: for a placeholder
	// the ones made for it, deepest first; for a cgroup, the daemon's
	// directory in one hierarchy (removed with what is beneath it).
	Paths []string `json:"paths"`
}

// openJournal opens the journal under stateDir, removes what the entries
// of a daemon that died name, and returns what it removed. An empty
// stateDir keeps no journal (nil, which records nothing).
func openJournal(stateDir string) (*journal, []string, error) {
	if stateDir == "" {
		return nil, nil, nil
	}
	dir := filepath.Join(stateDir, journalDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("journal %s: another sandboxd uses this state directory; give each daemon its own with --state-dir", dir)
		}
		return nil, nil, fmt.Errorf("journal %s: lock: %w", dir, err)
	}
	j := &journal{dir: dir, lock: lock}
	cleaned, err := j.clean()
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	return j, cleaned, nil
}

// clean removes what every entry names; an entry whose removal failed
// (a cgroup whose processes are still exiting) stays for the next start.
func (j *journal) clean() ([]string, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var cleaned []string
	for _, de := range entries {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(j.dir, name))
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		var e journalEntry
		if err := json.Unmarshal(b, &e); err != nil {
			// A write cut short: nothing was made for it yet.
			j.forget(name)
			continue
		}
		removed, err := e.remove()
		cleaned = append(cleaned, removed...)
		if err == nil {
			j.forget(name)
		}
	}
	return cleaned, nil
}

// remove removes what e names, returning the paths that were there and
// are gone now.
func (e journalEntry) remove() ([]string, error) {
	var gone []string
	for _, p := range e.Paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		switch e.Kind {
		case entryPlaceholder:
			// Only if still empty, never through a symlink: the user
			// may have put something there since.
			removeEmptyDirNoFollow(p)
		case entryCgroup:
			if err := removeCgroupTree(p); err != nil {
				return gone, err
			}
		}
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		gone = append(gone, e.Kind+" "+p)
	}
	return gone, nil
}

// record writes an entry and returns its name, for forget; "" without a
// journal. A failed write is not an error of the session's: it only loses
// the cleanup after a crash, as there was none before the journal.
func (j *journal) record(kind string, paths []string) string {
	if j == nil || len(paths) == 0 {
		return ""
	}
	b, err := json.Marshal(journalEntry{Kind: kind, Paths: paths})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	name := kind + "-" + hex.EncodeToString(sum[:8])
	tmp := filepath.Join(j.dir, "."+name)
	if os.WriteFile(tmp, b, 0o600) != nil || os.Rename(tmp, filepath.Join(j.dir, name)) != nil {
		os.Remove(tmp)
		return ""
	}
	return name
}

// forget removes entry name once what it names is gone.
func (j *journal) forget(name string) {
	if j == nil || name == "" {
		return
	}
	os.Remove(filepath.Join(j.dir, name))
}

// Leftovers are what the backend removed at its start of what a daemon
// that died had made (placeholders, cgroups), for the daemon's log.
func (b *backend) Leftovers() []string { return b.leftovers }
