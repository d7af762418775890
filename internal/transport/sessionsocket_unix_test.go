//go:build unix

package transport

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStaleSessionSocketsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "0123456789abcdef.sock")
	keep := filepath.Join(dir, "notes.txt")
	for _, p := range []string{stale, keep} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := PrepareSessionSocketDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("other file: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if err := PrepareSessionSocketDir(missing); err != nil {
		t.Errorf("missing directory: %v", err)
	}
	if fi, err := os.Lstat(missing); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o711 {
		t.Errorf("a missing directory is not made at start, 0711: %v %v", fi, err)
	}
}

// A symlink where the directory goes, or a directory others may write
// to (made there by a sandbox, say), is refused at start, not served in.
func TestSessionSocketDirNotTheDaemonsIsRefused(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	open := filepath.Join(dir, "open")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{link, open} {
		if err := PrepareSessionSocketDir(d); err == nil {
			t.Errorf("%s taken as the session sockets' directory", d)
		}
	}
}
