package launcherlinux

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenToSandbox(t *testing.T) {
	dir := t.TempDir()
	defer os.Chmod(dir, 0o700)
	// Not beneath dir: a mode without search for the test's own uid (not
	// root) would make it unknown, and unknown is open.
	missing := filepath.Join(t.TempDir(), "missing")
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	for _, tc := range []struct {
		mode     os.FileMode
		uid, gid uint32
		open     bool
	}{
		{0o700, uid, gid, true},
		{0o700, uid + 1, gid + 1, false},
		{0o750, uid + 1, gid, true},
		{0o701, uid + 1, gid + 1, true},
		// The owner's bits rule for the owner, whatever the group's.
		{0o070, uid, gid, false},
	} {
		if err := os.Chmod(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		got := openToSandbox([]string{dir, missing}, tc.uid, tc.gid)
		if want := tc.open; (len(got) == 1) != want || len(got) > 1 {
			t.Errorf("mode %o for uid %d gid %d: open %q, want open %v", tc.mode, tc.uid, tc.gid, got, want)
		}
	}
}
