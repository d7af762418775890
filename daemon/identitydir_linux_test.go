package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// The identity files' directory is named resolved, as the sockets and the
// state directory are: a sandbox's write roots are, and a mask planned
// under a symlinked spelling (/var/run for /run) would cover nothing.
func TestIdentityDirIsResolved(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "run")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if got, want := identityDir(BackendOptions{RuntimeDir: link}), filepath.Join(real, "sandboxd-identity"); got != want {
		t.Errorf("identityDir under %s = %s, want %s", link, got, want)
	}
}
