package initbuild

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSharedIsRemoved: every package whose tests call Shared removes the
// init again from its TestMain; otherwise each run of its test binary
// leaves a directory with a copy of the init in the temporary directory.
func TestSharedIsRemoved(t *testing.T) {
	dir, err := root()
	if err != nil {
		t.Fatal(err)
	}
	calls, removes := map[string]bool{}, map[string]bool{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == filepath.Join(dir, "internal", "initbuild") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.Dir(path)
		if strings.Contains(string(b), "initbuild.Shared()") {
			calls[pkg] = true
		}
		if strings.Contains(string(b), "initbuild.RemoveShared()") {
			removes[pkg] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("no package calls initbuild.Shared: the search is broken")
	}
	for pkg := range calls {
		if !removes[pkg] {
			rel, _ := filepath.Rel(dir, pkg)
			t.Errorf("%s calls initbuild.Shared but its TestMain does not call initbuild.RemoveShared", rel)
		}
	}
}

// TestRemoveShared: the directory Shared builds in is gone after
// RemoveShared.
func TestRemoveShared(t *testing.T) {
	path, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("%s has mode %v, want every uid to search it (0755)", filepath.Dir(path), fi.Mode().Perm())
	}
	RemoveShared()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("%s is still there after RemoveShared (%v)", filepath.Dir(path), err)
	}
}
