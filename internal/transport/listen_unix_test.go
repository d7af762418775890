//go:build unix

package transport

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenRefusesLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketPath))
	path := filepath.Join(dir, "d.sock")
	_, err := Listen(path)
	if err == nil || !strings.Contains(err.Error(), "longer than the") {
		t.Fatalf("Listen(%d-byte path) = %v, want an error naming the limit", len(path), err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Listen created %s for a path it refused: %v", dir, err)
	}
}

func TestListenLongestPath(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("s", maxSocketPath-1-len(dir)-1)
	if len(name) < 1 {
		t.Skipf("temporary directory %s leaves no room for a socket name", dir)
	}
	path := filepath.Join(dir, name)
	lis, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen(%d-byte path): %v", len(path), err)
	}
	lis.Close()
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	t.Run("refuses to displace a live daemon", func(t *testing.T) {
		path := filepath.Join(dir, "live.sock")
		lis, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "already serving") {
			t.Fatalf("second Listen: %v", err)
		}
	})
	t.Run("replaces a stale socket", func(t *testing.T) {
		path := filepath.Join(dir, "stale.sock")
		lis, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		lis.(*net.UnixListener).SetUnlinkOnClose(false)
		lis.Close()
		lis2, err := Listen(path)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		lis2.Close()
	})
	t.Run("leaves other files alone", func(t *testing.T) {
		path := filepath.Join(dir, "file")
		os.WriteFile(path, nil, 0o600)
		if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("Listen over a regular file: %v", err)
		}
	})
	t.Run("socket is 0660 in a created directory", func(t *testing.T) {
		path := filepath.Join(dir, "new", "sub", "d.sock")
		lis, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o660 {
			t.Fatalf("socket mode %v", fi.Mode().Perm())
		}
	})
	t.Run("refuses a directory others may write", func(t *testing.T) {
		open := filepath.Join(dir, "open")
		os.Mkdir(open, 0o777)
		os.Chmod(open, 0o777)
		if _, err := Listen(filepath.Join(open, "d.sock")); err == nil || !strings.Contains(err.Error(), "writable by others") {
			t.Fatalf("Listen in a world-writable directory: %v", err)
		}
	})
}
