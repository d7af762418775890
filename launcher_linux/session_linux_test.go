package launcherlinux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noSymlink refuses a policy path that crosses a symlink, wherever the
// symlink is and whether or not the rest of the path exists, and names
// it; a path of real directories passes, existing or not.
func TestNoSymlinkRefusesEverySymlinkOnThePath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{real, real + "/sub", real + "/missing", real + "/missing/deeper", "/"} {
		if err := noSymlink("f", p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, c := range []struct{ path, crossed string }{
		{link, link},
		{link + "/sub", link + "/sub"},
		{link + "/missing/deeper", link},
		{real + "/../link/sub", ""},
	} {
		err := noSymlink("f", c.path)
		if err == nil {
			t.Errorf("%s: passed, crosses a symlink", c.path)
			continue
		}
		if c.crossed != "" && !strings.Contains(err.Error(), "crosses a symlink: \""+c.crossed+"\" resolves to") {
			t.Errorf("%s: %v; want it to name %s", c.path, err, c.crossed)
		}
	}
	// The one open decides as the walk through every component does,
	// a dangling symlink included.
	for _, p := range []string{real, real + "/missing", link, link + "/sub", dangling, dangling + "/missing", real + "/../link/sub", real + "/./sub", "/"} {
		fast, walk := noSymlink("f", p), symlinkWalk("f", p)
		if (fast == nil) != (walk == nil) || fast != nil && fast.Error() != walk.Error() {
			t.Errorf("%s: %v; the walk: %v", p, fast, walk)
		}
	}
}
