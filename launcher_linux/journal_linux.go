package launcherlinux

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

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

	// spare names the files of forgotten entries, renamed out of the way
	// rather than removed: record rewrites one and renames it into place.
	// A launch that holds a placeholder records and forgets an entry, and
	// on ext4 creating a file where many were just removed scans the inode
	// bitmap past each of them (a tenth of the daemon's time when
	// launching back to back).
	mu    sync.Mutex
	spare []string
	made  int
}

// spareEntry prefixes the names of spare entry files; clean skips them,
// as every name with a dot.
const spareEntry = ".spare-"

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
		if strings.HasPrefix(name, spareEntry) {
			// A previous daemon's: this one numbers its own from 1.
			os.Remove(filepath.Join(j.dir, name))
			continue
		}
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
	tmp := j.takeSpare()
	// Written whole before the rename makes it an entry: a crash leaves
	// a spare file or a complete entry, never a part of one.
	if rewrite(tmp, b) != nil || os.Rename(tmp, filepath.Join(j.dir, name)) != nil {
		os.Remove(tmp)
		return ""
	}
	return name
}

// rewrite makes b the content of file path. Not by truncating it first:
// ext4 flushes a file truncated to nothing and written again when it is
// closed (auto_da_alloc), which made an entry cost twenty times as much.
func rewrite(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	return errors.Join(err, f.Close())
}

// takeSpare is the path of a spare entry file to rewrite, or of a new one.
func (j *journal) takeSpare() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.spare); n > 0 {
		name := j.spare[n-1]
		j.spare = j.spare[:n-1]
		return filepath.Join(j.dir, name)
	}
	j.made++
	return filepath.Join(j.dir, spareEntry+strconv.Itoa(j.made))
}

// forget drops entry name once what it names is gone: its file becomes a
// spare.
func (j *journal) forget(name string) {
	if j == nil || name == "" {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.made++
	spare := spareEntry + strconv.Itoa(j.made)
	if os.Rename(filepath.Join(j.dir, name), filepath.Join(j.dir, spare)) != nil {
		os.Remove(filepath.Join(j.dir, name))
		return
	}
	j.spare = append(j.spare, spare)
}

// Leftovers are what the backend removed at its start of what a daemon
// that died had made (placeholders, cgroups), for the daemon's log.
func (b *backend) Leftovers() []string { return b.leftovers }
