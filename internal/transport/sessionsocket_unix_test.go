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
	if err := RemoveStaleSessionSockets(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("other file: %v", err)
	}
	if err := RemoveStaleSessionSockets(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing directory: %v", err)
	}
}
