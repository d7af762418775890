//go:build unix

package daemon

import (
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
