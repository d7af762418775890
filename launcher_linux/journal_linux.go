package launcherlinux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// journal records in the state directory what the backend makes on the
// host and removes when sessions end: placeholder directories in users'
// write roots and the daemon's cgroups. A daemon killed before it could
// remove them leaves its entries, and the next one removes what they name
// when it starts. An entry is the content of one file, written before what
// it names is relied on and blanked after what it names is gone, so a crash
// at any point leaves at worst an entry for something already gone.
type journal struct {
	dir string
	// fd is dir's, opened without following a symlink: every read,
	// write and removal in the journal goes through it, so none of them
	// lands elsewhere, as root for a root daemon.
	fd *os.File
	// lock is held while the daemon runs: the entries are its own, and a
	// second daemon on the same state directory must not clean them.
	lock *os.File

	// Entries live in slot files the journal keeps and rewrites in place:
	// recording an entry writes it over a free slot, forgetting it blanks
	// the slot, one pwrite each. Creating and removing, or renaming, a
	// file per entry cost several times as much on ext4, where creating a
	// file where many were just removed scans the inode bitmap past each
	// of them, and a launch holding a placeholder records and forgets an
	// entry.
	mu    sync.Mutex
	free  []*journalSlot
	used  map[string]*journalSlot
	made  int
	files int // slots with an open file
}

// journalSlot is one slot file. Its content is an entry padded with
// spaces, which JSON allows after a value, or only spaces when the slot
// is free; size is the most it has held, so a write of an entry or of
// blanks covers whatever was there before.
type journalSlot struct {
	j    *journal
	name string
	f    *os.File // nil when closed to stay within maxSlotFiles
	size int
}

// maxSlotFiles bounds the slot files the journal keeps open: a daemon
// with thousands of sessions in as many workspaces has as many entries,
// and its descriptors are what bound how many sessions it holds. Beyond
// it, a slot is opened for each write.
const maxSlotFiles = 64

// slotPrefix names the slot files: "entry-N".
const slotPrefix = "entry-"

// spareEntry prefixes the spare entry files of daemons from before slots;
// clean removes them.
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
	// Path is what the entry names: a placeholder, the deepest directory
	// made for it; a cgroup, the daemon's directory in one hierarchy
	// (removed with what is beneath it). Bytes, which encoding/json
	// writes in base64: a JSON string holds UTF-8 alone, and a name
	// that is not would be written as another, which no start finds.
	Path []byte `json:"path,omitempty"`
	// Made are, for a placeholder, the directories made for it, deepest
	// first: Made[i] is Path's i-th parent. Each is removed only if it
	// still is that directory, and empty.
	Made []dirID `json:"made,omitempty"`
	// Paths is the entry of a daemon from before Path: the directories
	// to remove, as strings. A cgroup's is still obeyed; a
	// placeholder's says nothing of which directories the daemon made,
	// and they are left (remove).
	Paths []string `json:"paths,omitempty"`
}

// dirID is what a directory is, as the daemon saw it made: its device
// and inode. Zero until the daemon has seen it (the init makes the
// placeholders as it sets the sandbox up); a directory with no identity
// recorded is not removed.
type dirID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// openJournal opens the journal under stateDir, removes what the entries
// of a daemon that died name, and returns what it removed and what it
// left though an entry named it (each with why). An empty stateDir keeps
// no journal (nil, which records nothing).
func openJournal(stateDir string) (*journal, []string, []string, error) {
	if stateDir == "" {
		return nil, nil, nil, nil
	}
	dir := filepath.Join(stateDir, journalDir)
	fd, err := openOwnDir(stateDir, journalDir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("journal: %w", err)
	}
	lfd, err := unix.Openat(int(fd.Fd()), ".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		fd.Close()
		return nil, nil, nil, fmt.Errorf("journal %s: lock: %w", dir, err)
	}
	lock := os.NewFile(uintptr(lfd), filepath.Join(dir, ".lock"))
	if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		fd.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, nil, fmt.Errorf("journal %s: another sandboxd uses this state directory; give each daemon its own with --state-dir", dir)
		}
		return nil, nil, nil, fmt.Errorf("journal %s: lock: %w", dir, err)
	}
	j := &journal{dir: dir, fd: fd, lock: lock, used: map[string]*journalSlot{}}
	cleaned, left, err := j.clean()
	if err != nil {
		lock.Close()
		fd.Close()
		return nil, nil, nil, err
	}
	return j, cleaned, left, nil
}

// openOwnDir opens stateDir's directory sub, making both if they are not
// there, and neither through a symlink of their own: what the journal
// holds is obeyed as the daemon, so both must be the daemon's alone. One
// that is a symlink, is owned by another uid or is writable by its group
// or others is refused: someone else could put entries there, or swap
// the directory for one of theirs. The directories above stateDir are
// taken as they resolve (a /var/run that is /run).
func openOwnDir(stateDir, sub string) (*os.File, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(filepath.Clean(stateDir)))
	if err != nil {
		return nil, err
	}
	pfd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", parent, err)
	}
	defer unix.Close(pfd)
	sfd, err := openOwnDirAt(pfd, filepath.Base(filepath.Clean(stateDir)), stateDir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(sfd)
	fd, err := openOwnDirAt(sfd, sub, filepath.Join(stateDir, sub))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(stateDir, sub)), nil
}

// openOwnDirAt opens name in dirfd, making it if it is not there, as a
// directory of the daemon's own (see openOwnDir); path names it in errors.
func openOwnDirAt(dirfd int, name, path string) (int, error) {
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, fmt.Errorf("%s is not a directory but a symlink or file: the daemon's state must be a directory of its own; remove it or choose another --state-dir", path)
	}
	if err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is owned by uid %d with mode %o: the daemon's state must be a directory its uid (%d) owns that no group or other user can write to; chown and chmod go-w it, or choose another --state-dir", path, st.Uid, st.Mode&0o7777, euid)
	}
	return fd, nil
}

// clean removes what every entry names; an entry whose removal failed
// (a cgroup whose processes are still exiting) stays for the next start.
// It returns what it removed and what it left.
func (j *journal) clean() (cleaned, left []string, err error) {
	// A duplicate of j.fd: reading a directory moves its offset, and
	// the slots are opened through j.fd later.
	dfd, err := unix.Openat(int(j.fd.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	d := os.NewFile(uintptr(dfd), j.dir)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	// In order, as the log of what was removed reads best.
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(name, spareEntry) {
			j.unlink(name)
			continue
		}
		if strings.HasPrefix(name, ".") {
			continue
		}
		b, err := j.read(name)
		if errors.Is(err, errNotEntry) {
			// The journal makes regular files only: anything else is
			// not its, and not a reason to refuse to start.
			j.unlink(name)
			continue
		}
		if errors.Is(err, errTooLong) {
			// Cut short, it would read as a write cut short and be
			// dropped with what it names: kept for whoever wrote it.
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("journal: %w", err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			// A free slot: this daemon makes its own.
			j.unlink(name)
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(b, &e); err != nil {
			// A write cut short: nothing was made for it yet.
			j.unlink(name)
			continue
		}
		removed, kept, err := e.remove()
		cleaned = append(cleaned, removed...)
		left = append(left, kept...)
		if err == nil {
			j.unlink(name)
		}
	}
	return cleaned, left, nil
}

// errNotEntry is read's answer for what is not a regular file.
var errNotEntry = errors.New("not a journal entry")

// read reads the journal's file name, never through a symlink.
func (j *journal) read(name string) ([]byte, error) {
	fd, err := unix.Openat(int(j.fd.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, errNotEntry
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(j.dir, name))
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotEntry
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEntryBytes+1))
	if err == nil && len(b) > maxEntryBytes {
		return nil, errTooLong
	}
	return b, err
}

// errTooLong is read's answer for an entry longer than maxEntryBytes.
var errTooLong = errors.New("longer than any entry the daemon writes")

// unlink removes the journal's name: a file, or an empty directory
// (no daemon's, but one made there must not stop every start).
func (j *journal) unlink(name string) {
	if unix.Unlinkat(int(j.fd.Fd()), name, 0) != nil {
		unix.Unlinkat(int(j.fd.Fd()), name, unix.AT_REMOVEDIR)
	}
}

// maxEntryBytes bounds what clean reads of one entry, above the most a
// daemon writes: the entries of daemons from before Path listed each
// directory made for a placeholder and so grew with the square of its
// depth, up to about 4 MiB for a PATH_MAX path of one-letter names, six
// times that where JSON escapes every byte (one of Path grows with its
// depth alone). An entry beyond it is not a daemon's and is left as it
// is.
const maxEntryBytes = 32 << 20

// valid says whether e names only what the daemon makes, so that an
// entry someone else wrote (the journal is a file the next daemon obeys,
// as root for a root daemon) can remove nothing else: Path is absolute,
// clean and not "/"; a placeholder's directories are Path and its
// parents, short of "/"; a cgroup is a daemon's own directory,
// sandboxd-PID, on a cgroup filesystem (checked as it is removed).
func (e journalEntry) valid() bool {
	p := string(e.Path)
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return false
	}
	switch e.Kind {
	case entryPlaceholder:
		// A clean absolute path has as many names as slashes.
		return len(e.Made) > 0 && len(e.Made) <= strings.Count(p, "/")
	case entryCgroup:
		pid, ok := strings.CutPrefix(filepath.Base(p), "sandboxd-")
		n, err := strconv.Atoi(pid)
		return len(e.Made) == 0 && ok && err == nil && n > 0 && strconv.Itoa(n) == pid
	}
	return false
}

// onCgroupFS says whether dir, reached without following a symlink, is
// on a cgroup filesystem, where every directory is a cgroup.
func onCgroupFS(dir string) bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return false
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC || st.Type == unix.CGROUP_SUPER_MAGIC
}

// remove removes what e names, returning what was there and is gone now,
// and what was there and is left, with why. An entry that names what the
// daemon does not make is dropped whole.
func (e journalEntry) remove() (gone, left []string, err error) {
	if e.Path == nil && len(e.Paths) > 0 {
		switch e.Kind {
		case entryCgroup:
			if len(e.Paths) == 1 {
				e.Path = []byte(e.Paths[0])
			}
		case entryPlaceholder:
			for _, p := range e.Paths {
				if filepath.IsAbs(p) && lexists(p) {
					left = append(left, e.Kind+" "+p+" (recorded by an earlier sandboxd, which did not say which directory it made)")
				}
			}
			return nil, left, nil
		}
	}
	if !e.valid() {
		return nil, nil, nil
	}
	p := string(e.Path)
	if e.Kind == entryCgroup {
		if !lexists(p) || !onCgroupFS(p) {
			return nil, nil, nil
		}
		if err := removeCgroupTree(p); err != nil {
			return nil, nil, err
		}
		if !lexists(p) {
			gone = append(gone, e.Kind+" "+p)
		}
		return gone, nil, nil
	}
	for _, id := range e.Made {
		removed, why := removeMadeDir(p, id)
		switch {
		case removed:
			gone = append(gone, e.Kind+" "+p)
		case why != "":
			left = append(left, e.Kind+" "+p+" ("+why+")")
		}
		p = filepath.Dir(p)
	}
	return gone, left, nil
}

// lexists says whether there is something at path, a symlink included.
func lexists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// removeMadeDir removes the directory at path if it is the one the daemon
// made (id) and empty, never through a symlink: since the daemon died,
// the user may have put something there or another directory in its
// place, and an entry naming a directory the daemon did not make (not its
// own, or from before Made) must not remove it. It says whether it did,
// or why not; neither for nothing there. A directory swapped in between
// the look and the removal is one its parent's owner put there, who
// could remove it as well. A parent that cannot be opened (a symlink on
// the way, no search permission) may still hold the directory, which is
// left and said so.
func removeMadeDir(path string, id dirID) (bool, string) {
	parent, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(path), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false, ""
	}
	if err != nil {
		return false, "its parent: " + err.Error()
	}
	defer unix.Close(parent)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, filepath.Base(path), &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return false, ""
	} else if err != nil {
		return false, err.Error()
	}
	switch {
	case id == dirID{}:
		return false, "the daemon died before it saw the directory made"
	case st.Mode&unix.S_IFMT != unix.S_IFDIR || uint64(st.Dev) != id.Dev || st.Ino != id.Ino:
		return false, "not the directory the daemon made"
	}
	if err := unix.Unlinkat(parent, filepath.Base(path), unix.AT_REMOVEDIR); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// madeDirIDs are the identities of the directories made for placeholder
// p, n of them, deepest first (journalEntry.Made): zero for one that is
// not there, or not a directory, when looked at without following a
// symlink.
func madeDirIDs(p string, n int) []dirID {
	ids := make([]dirID, n)
	for i := range ids {
		parent, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(p), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
		if err == nil {
			var st unix.Stat_t
			if unix.Fstatat(parent, filepath.Base(p), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				ids[i] = dirID{Dev: uint64(st.Dev), Ino: st.Ino}
			}
			unix.Close(parent)
		}
		p = filepath.Dir(p)
	}
	return ids
}

// record writes entry e and returns its name, for forget; "" without a
// journal. A failed write is not an error of the session's: it only loses
// the cleanup after a crash, as there was none before the journal.
func (j *journal) record(e journalEntry) string {
	if j == nil || e.Path == nil {
		return ""
	}
	b, err := json.Marshal(e)
	if err != nil {
		return ""
	}
	sl, err := j.takeSlot()
	if err != nil {
		return ""
	}
	// A write cut short (the daemon killed in the middle of a long
	// entry, the host going down) leaves text that is not valid JSON,
	// which clean takes for nothing made: nothing is, until this returns.
	if err := sl.write(b); err != nil {
		j.dropSlot(sl)
		return ""
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.used[sl.name] = sl
	j.closeBeyondLimitLocked(sl)
	return sl.name
}

// replace writes e as a new entry, then forgets entry old, and returns
// the name of the one that stands. Rewritten in place, an entry longer
// than a page could be cut short by a crash, and clean would drop it as
// a write that never finished, with the directories it names; this way a
// crash leaves old, e or both, each whole, and the next start removes
// what the one naming identities does. If e cannot be written, old
// stands.
func (j *journal) replace(old string, e journalEntry) string {
	name := j.record(e)
	if name == "" {
		return old
	}
	j.forget(old)
	return name
}

// forget drops entry name once what it names is gone: its slot is blanked
// and free for the next entry.
func (j *journal) forget(name string) {
	if j == nil || name == "" {
		return
	}
	j.mu.Lock()
	sl := j.used[name]
	delete(j.used, name)
	if sl != nil && sl.f == nil {
		j.files++
	}
	j.mu.Unlock()
	if sl == nil {
		return
	}
	if err := sl.write(nil); err != nil {
		// Left as it is, the entry would name what is gone to the next
		// daemon, which finds nothing to remove; only this slot is lost.
		j.dropSlot(sl)
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.free = append(j.free, sl)
	j.closeBeyondLimitLocked(sl)
}

// takeSlot returns a free slot, with its file counted among j.files
// though it may still have to be opened, or a new one.
func (j *journal) takeSlot() (*journalSlot, error) {
	j.mu.Lock()
	if n := len(j.free); n > 0 {
		sl := j.free[n-1]
		j.free = j.free[:n-1]
		if sl.f == nil {
			j.files++
		}
		j.mu.Unlock()
		return sl, nil
	}
	j.files++
	j.mu.Unlock()
	for {
		j.mu.Lock()
		j.made++
		name := slotPrefix + strconv.Itoa(j.made)
		j.mu.Unlock()
		f, err := j.openSlot(name, unix.O_CREAT|unix.O_EXCL)
		if errors.Is(err, unix.EEXIST) {
			// An entry of a daemon that died whose removal failed.
			continue
		}
		if err != nil {
			j.mu.Lock()
			j.files--
			j.mu.Unlock()
			return nil, err
		}
		return &journalSlot{j: j, name: name, f: f}, nil
	}
}

// openSlot opens the slot file name for writing, with flags besides.
func (j *journal) openSlot(name string, flags int) (*os.File, error) {
	fd, err := unix.Openat(int(j.fd.Fd()), name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(j.dir, name)), nil
}

// closeBeyondLimitLocked closes sl's file when the journal holds more than
// maxSlotFiles open; j.mu is held and sl is not being written.
func (j *journal) closeBeyondLimitLocked(sl *journalSlot) {
	if j.files > maxSlotFiles && sl.f != nil {
		sl.f.Close()
		sl.f = nil
		j.files--
	}
}

// dropSlot gives up a slot whose write failed.
func (j *journal) dropSlot(sl *journalSlot) {
	if sl.f != nil {
		sl.f.Close()
	}
	j.unlink(sl.name)
	j.mu.Lock()
	j.files--
	j.mu.Unlock()
}

// write makes b, padded with spaces, the slot's content, opening the
// file first if it was closed. The content never shrinks, so the padding
// covers all of an earlier, longer entry.
func (sl *journalSlot) write(b []byte) error {
	if sl.f == nil {
		f, err := sl.j.openSlot(sl.name, 0)
		if err != nil {
			return err
		}
		sl.f = f
	}
	buf := make([]byte, max(len(b), sl.size))
	copy(buf, b)
	for i := len(b); i < len(buf); i++ {
		buf[i] = ' '
	}
	if _, err := sl.f.WriteAt(buf, 0); err != nil {
		return err
	}
	sl.size = len(buf)
	return nil
}

// Leftovers are what the backend removed at its start of what a daemon
// that died had made (placeholders, cgroups), for the daemon's log.
func (b *backend) Leftovers() []string { return b.leftovers }

// LeftBehind are what the backend left at its start though the journal
// of a daemon that died named it, each with why (a placeholder that is
// not the directory the daemon made, or no longer empty), for the
// daemon's log.
func (b *backend) LeftBehind() []string { return b.leftBehind }
