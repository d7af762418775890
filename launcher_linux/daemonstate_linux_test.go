package launcherlinux

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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

// A named user in the directory's access ACL may be the sandbox's uid
// whatever the modes say: the directory counts as open.
func TestOpenToSandboxTakesAnACLForOpen(t *testing.T) {
	dir := t.TempDir()
	uid := uint32(os.Getuid())
	// POSIX ACL xattr, version 2: owner rwx, named user uid+1 r-x, group
	// ---, mask r-x, other ---.
	acl := []byte{2, 0, 0, 0}
	for _, e := range [][3]uint32{{0x01, 7, 0xffffffff}, {0x02, 5, uid + 1}, {0x04, 0, 0xffffffff}, {0x10, 5, 0xffffffff}, {0x20, 0, 0xffffffff}} {
		acl = binary.LittleEndian.AppendUint16(acl, uint16(e[0]))
		acl = binary.LittleEndian.AppendUint16(acl, uint16(e[1]))
		acl = binary.LittleEndian.AppendUint32(acl, e[2])
	}
	if err := unix.Setxattr(dir, "system.posix_acl_access", acl, 0); err != nil {
		t.Skipf("no POSIX ACLs here: %v", err)
	}
	if got := openToSandbox([]string{dir}, uid+1, uint32(os.Getgid())+1); len(got) != 1 {
		t.Errorf("a directory whose ACL names the sandbox's uid is not open: %q", got)
	}
}
