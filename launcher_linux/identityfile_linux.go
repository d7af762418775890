package launcherlinux

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// identityStore keeps the identity files a root daemon's sessions share:
// one per content, which every session having that content binds
// read-only, one page-cache copy instead of a file in each init's tmpfs
// (two pages, an inode and a dentry apiece, unreclaimable, for as long as
// the session lasts). Its directory is the daemon's own, in its runtime
// directory (Config.IdentityDir), emptied when the daemon starts and
// removed when it stops: a session binds the file, not the name, and keeps
// it whatever becomes of the name. The files are root's, 0444, in a
// directory of root's that no one else may write, beneath directories
// that only root may change; no sandbox uid is 0, and a write root over
// the directory is never ID-mapped (idmapPlan), so no sandbox can write
// one.
type identityStore struct {
	dir string
	// verified are the files whose content has been read back, by what
	// tells a file apart from itself rewritten.
	verified map[string]fileStamp
}

// newIdentityStore empties dir, left by a daemon that could not remove it,
// and returns its store.
func newIdentityStore(dir string) (*identityStore, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("identity files: %w", err)
	}
	return &identityStore{dir: dir}, nil
}

// close removes the directory; the sessions still running keep the files
// they bind.
func (s *identityStore) close() {
	os.RemoveAll(s.dir)
	s.verified = nil
}

// path is the shared file holding content, written there if it is not
// yet, or not intact. An error leaves the caller to fall back to a file
// of the init's own.
func (s *identityStore) path(content string) (string, error) {
	sum := sha256.Sum256([]byte(content))
	name := filepath.Join(s.dir, hex.EncodeToString(sum[:]))
	if st, ok := s.verified[name]; ok && stampOf(name) == st {
		return name, nil
	}
	delete(s.verified, name)
	if err := s.checkDir(); err != nil {
		return "", err
	}
	if !s.intact(name, content) {
		if err := s.write(name, content); err != nil {
			return "", err
		}
	}
	st := stampOf(name)
	if !st.ok {
		return "", fmt.Errorf("identity file %s: gone as it was written", name)
	}
	if s.verified == nil {
		s.verified = map[string]fileStamp{}
	}
	s.verified[name] = st
	return name, nil
}

// trees are what idmapPlan must never map: the directory, once there is
// a store.
func (s *identityStore) trees() []string {
	if s == nil {
		return nil
	}
	return []string{s.dir}
}

// checkDir makes the directory, and refuses one that anyone but this
// daemon's uid could put files in, or rename or replace, or that a
// sandbox's init could not reach: it opens the files as the sandbox uid,
// whatever that is, following no symlink, and a launch whose file it
// cannot open fails.
func (s *identityStore) checkDir() error {
	if err := unix.Mkdir(s.dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("identity files: %w", err)
	}
	var st unix.Stat_t
	for d := filepath.Dir(s.dir); ; d = filepath.Dir(d) {
		if err := unix.Lstat(d, &st); err != nil {
			return fmt.Errorf("identity files: %w", err)
		}
		// A sticky directory (/tmp) lets no one else rename what root
		// made in it.
		shut := st.Mode&0o022 == 0 || st.Mode&unix.S_ISVTX != 0
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o001 == 0 || int(st.Uid) != os.Geteuid() || !shut {
			return fmt.Errorf("identity files: %s must be a directory of uid %d that every uid may search and no one else may change (mode %o, uid %d)", d, os.Geteuid(), st.Mode&0o7777, st.Uid)
		}
		if d == "/" {
			break
		}
	}
	if err := unix.Lstat(s.dir, &st); err != nil {
		return fmt.Errorf("identity files: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 || st.Mode&0o001 == 0 {
		return fmt.Errorf("identity files: %s must be a directory of uid %d that every uid may search and no one else may write (mode %o, uid %d)", s.dir, os.Geteuid(), st.Mode&0o7777, st.Uid)
	}
	return nil
}

// intact: name is this daemon's read-only regular file holding content
// exactly. Its name says nothing; what it holds is read.
func (s *identityStore) intact(name, content string) bool {
	var st unix.Stat_t
	if unix.Lstat(name, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() ||
		st.Mode&0o7777 != 0o444 || st.Size != int64(len(content)) {
		return false
	}
	b, err := os.ReadFile(name)
	return err == nil && string(b) == content
}

// write puts content at name whole or not at all: a session binding it
// meanwhile gets the old file or the new, never half of one.
func (s *identityStore) write(name, content string) error {
	f, err := os.CreateTemp(s.dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("identity file: %w", err)
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("identity file: %w", err)
	}
	return nil
}
