//go:build unix

package launcherdarwin

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

func TestResolveExisting(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(dir, "real", "sub"))
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/":                                 "/",
		dir + "/real/sub":                   dir + "/real/sub",
		dir + "/link/sub":                   dir + "/real/sub",
		dir + "/link/sub/not/yet":           dir + "/real/sub/not/yet",
		dir + "/link/../link/sub/":          dir + "/real/sub",
		dir + "/missing/file":               dir + "/missing/file",
		dir + "/dangling/file":              dir + "/dangling/file",
		"/no-such-top-level-dir-here/x/y/z": "/no-such-top-level-dir-here/x/y/z",
	} {
		if got := resolveExisting(in); got != want {
			t.Errorf("resolveExisting(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	// The umask must not decide the test.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func TestExecCheck(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/bin/tool", 0o755)
	mustWrite(t, dir+"/bin/noexec", 0o644)
	mustWrite(t, dir+"/bin3/noexec", 0o755)
	mustWrite(t, dir+"/unlisted/hidden", 0o755)
	mustWrite(t, dir+"/secret/tool", 0o755)
	mustMkdir(t, dir+"/work")
	mustMkdir(t, dir+"/nosearch")
	if err := os.Chmod(dir+"/nosearch", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir+"/bin", dir+"/binlink"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir+"/secret", dir+"/secretlink"); err != nil {
		t.Fatal(err)
	}

	pol := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Read:      sandboxdv1.Filesystem_LISTED,
			ReadRoots: []string{dir + "/bin", dir + "/bin3", dir + "/secret", dir + "/nosearch"},
			Write:     []string{dir + "/work"},
			Deny:      []string{dir + "/secret"},
		},
		Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
	}
	plan, err := NewPlan(launcher.PlanRequest{Policy: pol, SessionID: "s1"}, PlanHost{Resolve: resolveExisting})
	if err != nil {
		t.Fatal(err)
	}
	c := execCheck{plan: plan, id: identity{uid: uint32(os.Getuid()), gids: []uint32{uint32(os.Getgid())}}, resolve: resolveExisting}

	path := func(dirs ...string) []string { return []string{"HOME=/nowhere", "PATH=" + strings.Join(dirs, ":")} }
	commands := []struct {
		name, argv0, cwd string
		env              []string
		errno            syscall.Errno
		hint             string
	}{
		{"found in PATH", "tool", dir + "/work", path(dir + "/bin"), 0, ""},
		{"the last PATH counts", "tool", dir + "/work", append(path(dir+"/work"), "PATH="+dir+"/bin"), 0, ""},
		{"found through a symlink", "tool", dir + "/work", path(dir + "/binlink"), 0, ""},
		{"not found", "missing", dir + "/work", path(dir+"/bin", dir+"/work"), syscall.ENOENT, "not found in the command's PATH"},
		{"not executable", "noexec", dir + "/work", path(dir + "/bin"), syscall.EACCES, "may not execute"},
		{"not executable, but later in PATH", "noexec", dir + "/work", path(dir+"/bin", dir+"/bin3"), 0, ""},
		{"a directory", "bin", dir + "/work", path(dir), syscall.EACCES, "directory"},
		{"not readable under read LISTED", "hidden", dir + "/work", path(dir + "/unlisted"), syscall.EPERM, "LISTED"},
		{"a path", dir + "/bin/tool", dir + "/work", nil, 0, ""},
		{"a relative path", "./bin/tool", dir, nil, 0, ""},
		{"a relative path from elsewhere", "./bin/tool", dir + "/work", nil, syscall.ENOENT, ""},
		{"a deny path", dir + "/secret/tool", dir + "/work", nil, syscall.EPERM, "filesystem.deny"},
		{"a deny path through a symlink", dir + "/secretlink/tool", dir + "/work", nil, syscall.EPERM, "filesystem.deny"},
		{"an empty argv[0]", "", dir + "/work", nil, syscall.ENOENT, ""},
		{"the default PATH", "sh", dir + "/work", []string{"HOME=/nowhere"}, 0, ""},
	}
	for _, tt := range commands {
		t.Run(tt.name, func(t *testing.T) {
			e := c.command(tt.argv0, tt.cwd, tt.env)
			if tt.errno == 0 {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || e.Op != "execve" || e.Errno != tt.errno || !strings.Contains(e.Hint, tt.hint) {
				t.Fatalf("got %v, want execve %v with a hint about %q", e, tt.errno, tt.hint)
			}
		})
	}

	dirs := []struct {
		name, cwd string
		errno     syscall.Errno
		hint      string
	}{
		{"a write root", dir + "/work", 0, ""},
		{"missing", dir + "/missing", syscall.ENOENT, ""},
		{"a file", dir + "/bin/tool", syscall.ENOTDIR, ""},
		{"a deny path", dir + "/secret", syscall.EPERM, "filesystem.deny"},
		{"not readable under read LISTED", dir + "/unlisted", syscall.EPERM, "LISTED"},
		{"not searchable", dir + "/nosearch", syscall.EACCES, "may not search"},
	}
	for _, tt := range dirs {
		t.Run("cwd "+tt.name, func(t *testing.T) {
			e := c.cwd(tt.cwd)
			if tt.errno == 0 {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || e.Op != "chdir" || e.Path != tt.cwd || e.Errno != tt.errno || !strings.Contains(e.Hint, tt.hint) {
				t.Fatalf("got %v, want chdir %v with a hint about %q", e, tt.errno, tt.hint)
			}
		})
	}
}

func TestExecCheckSearchesEveryDirectoryAbove(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/locked/bin/tool", 0o755)
	mustMkdir(t, dir+"/locked/work")
	if err := os.Chmod(dir+"/locked", 0o700); err != nil {
		t.Fatal(err)
	}
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_ALL}, Network: &sandboxdv1.Network{}}
	plan, err := NewPlan(launcher.PlanRequest{Policy: pol, SessionID: "s1"}, PlanHost{Resolve: resolveExisting})
	if err != nil {
		t.Fatal(err)
	}
	// Another uid in another group: the owner's bits of "locked" are not
	// its own.
	other := identity{uid: uint32(os.Getuid()) + 1, gids: []uint32{uint32(os.Getgid()) + 1}}
	c := execCheck{plan: plan, id: other, resolve: resolveExisting}
	if e := c.command(dir+"/locked/bin/tool", "/", nil); e == nil || e.Errno != syscall.EACCES || !strings.Contains(e.Hint, "may not search") {
		t.Errorf("command below a directory it may not search: %v", e)
	}
	if e := c.cwd(dir + "/locked/work"); e == nil || e.Errno != syscall.EACCES || !strings.Contains(e.Hint, "may not search") {
		t.Errorf("working directory below a directory it may not search: %v", e)
	}
	owner := execCheck{plan: plan, id: identity{uid: uint32(os.Getuid()), gids: []uint32{uint32(os.Getgid())}}, resolve: resolveExisting}
	if e := owner.command(dir+"/locked/bin/tool", "/", nil); e != nil {
		t.Errorf("the owner: %v", e)
	}
}

func TestIdentityMay(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	for _, tt := range []struct {
		mode     os.FileMode
		id       identity
		want     os.FileMode
		expected bool
	}{
		{0o700, identity{uid: uid}, 0o1, true},
		{0o070, identity{uid: uid, gids: []uint32{gid}}, 0o1, false}, // the owner's bits, not the group's
		{0o070, identity{uid: uid + 1, gids: []uint32{gid}}, 0o1, true},
		{0o007, identity{uid: uid + 1, gids: []uint32{gid}}, 0o1, false},
		{0o007, identity{uid: uid + 1, gids: []uint32{gid + 1}}, 0o5, true},
		{0o004, identity{uid: uid + 1, gids: []uint32{gid + 1}}, 0o5, false},
	} {
		mustWrite(t, p, tt.mode)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := tt.id.may(fi, tt.want); got != tt.expected {
			t.Errorf("mode %o, %+v wants %o: %v", tt.mode, tt.id, tt.want, got)
		}
	}
}
