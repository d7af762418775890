//go:build unix

package transport

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// A socket nobody listens on is removed at start; one a listener holds
// (another daemon's live session, its directory shared by an embedder of
// Serve) is kept, as is any other file.
func TestStaleSessionSocketsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "0123456789abcdef.sock")
	deadListener(t, stale)
	live := filepath.Join(dir, "fedcba9876543210.sock")
	lis, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PrepareSessionSocketDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket: %v", err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("a live session socket was removed: %v", err)
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

// deadListener leaves at p the socket of a listener that is gone, as a
// daemon that died does.
func deadListener(t *testing.T, p string) {
	t.Helper()
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	lis.SetUnlinkOnClose(false)
	lis.Close()
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
