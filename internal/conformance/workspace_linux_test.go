package conformance

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// workspaceScript edits a workspace the way a tool would, from inside it:
// it sees the workspace as its own, creates, edits, renames, removes, makes
// a directory and changes modes (no set-id bits), then prints ok.
const workspaceScript = `set -e
test "$(stat -c %u:%g .)" = "$1"
echo new > created
echo after >> edit
mkdir dir
mv created dir/moved
touch gone
rm gone
chmod 0640 edit
chmod 0750 dir
echo ok-workspace`

// rootWorkspace is a directory as a root caller's repository is: root's,
// mode 0700, holding a file of root's. A rootless suite cannot make one and
// uses the root-only directory its runner prepared (rootOwnedEnv).
func rootWorkspace(f *fixture) (dir, edit string) {
	f.t.Helper()
	if !suite.asRoot {
		dir, _ := rootOwnedFixture(f)
		return filepath.Join(dir, "private"), ""
	}
	dir = f.path("ws")
	if err := os.Mkdir(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	edit = filepath.Join(dir, "edit")
	if err := os.WriteFile(edit, []byte("before\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return dir, edit
}

// idmapsHere says whether the suite's daemon maps a root-owned write root
// to the sandbox uid: a root daemon on the namespaces set. Everywhere else
// such a root must be refused, never granted unwritable.
func idmapsHere() bool {
	return suite.asRoot && linuxHost.namespaces && suite.mechanism != "landlock"
}

// TestRootCallersWorkspace: a root caller's own workspace, root:root 0700,
// is writable by its sandbox with the workspace as the cwd, and stays
// root's on the host (issue 21); where the daemon cannot map it, the
// launch is refused naming the path, owner, mode, uid and a remedy.
func TestRootCallersWorkspace(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws, edit := rootWorkspace(f)
			st := commandStart(path == "pty", fsPolicy(list(ws), nil, nil), nil,
				"/bin/sh", "-c", workspaceScript, "sh", fmt.Sprintf("%d:%d", suite.uid, suite.gid))
			st.Command.Cwd = ws
			s := run(t, st, nil)
			if !idmapsHere() {
				wantUnusable(t, s, ws)
				return
			}
			if s.err != nil || s.exit().GetExitCode() != 0 || !strings.Contains(s.stdout, "ok-workspace") {
				t.Fatalf("session: %v, exit %v\n%s", s.err, s.exit(), s)
			}
			enforcedBy(t, s, "filesystem.write")
			modes := map[string]fs.FileMode{"edit": 0o640, "dir": fs.ModeDir | 0o750}
			err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := os.Lstat(p)
				if err != nil {
					return err
				}
				sys := fi.Sys().(*syscall.Stat_t)
				if sys.Uid != 0 || sys.Gid != 0 {
					t.Errorf("%s is %d:%d on the host, want root's (0:0) as the workspace", p, sys.Uid, sys.Gid)
				}
				if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
					t.Errorf("%s has set-id bits on the host: %v", p, fi.Mode())
				}
				if want, ok := modes[strings.TrimPrefix(p, ws+"/")]; ok && fi.Mode() != want {
					t.Errorf("%s has mode %v on the host, want %v as the sandbox set it", p, fi.Mode(), want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			unchanged(t, edit, "before\nafter\n")
			for _, gone := range []string{"gone", "created"} {
				if _, err := os.Lstat(filepath.Join(ws, gone)); err == nil {
					t.Errorf("%s is still on the host", gone)
				}
			}
			if _, err := os.Lstat(filepath.Join(ws, "dir", "moved")); err != nil {
				t.Errorf("the renamed file: %v", err)
			}
		})
	}
}

// rootAsDaemonSees is how a refusal names root as an owner: a daemon
// wrapped in a user namespace of its own (bwrap --unshare-user) sees it as
// the overflow uid.
func rootAsDaemonSees() string {
	if slices.Contains(suite.wrap, "--unshare-user") {
		return "owner 65534"
	}
	return "owner 0"
}

// wantUnusable fails unless s was refused for filesystem.write, naming
// the root, its owner and mode, the sandbox uid and a remedy.
func wantUnusable(t *testing.T, s *session, root string) {
	t.Helper()
	u := client.UnenforceableFrom(s.err)
	if u == nil || u.GetField() != "filesystem.write" || u.GetRemedy() == "" {
		t.Fatalf("want a refusal of filesystem.write with a remedy, got %v\n%s", s.err, s)
	}
	for _, want := range []string{root, rootAsDaemonSees() + ", mode 0700", fmt.Sprintf("uid %d", suite.uid)} {
		if !strings.Contains(s.err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", s.err, want)
		}
	}
	t.Logf("refused: %v", s.err)
}

// TestInaccessibleCwdIsNamed: a cwd the sandbox uid may not enter fails to
// start with a message that says so, not an execve error that blames the
// program.
func TestInaccessibleCwdIsNamed(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			dir, _ := rootWorkspace(f)
			st := commandStart(path == "pty", nil, nil, trueCmd)
			st.Command.Cwd = dir
			s := run(t, st, nil)
			e := s.exit()
			want := fmt.Sprintf("cwd %s is not accessible to the sandbox uid %d (%s, mode 0700", dir, suite.uid, rootAsDaemonSees())
			if s.err != nil || e.GetState() != sandboxdv1.State_FAILED_TO_START || e.GetExitCode() != 126 || !strings.HasPrefix(e.GetReason(), want) {
				t.Fatalf("got %v, exit %v; want FAILED_TO_START, 126, reason %q...", s.err, e, want)
			}
		})
	}
}

// TestMissingWriteRootIsNamed: sandboxctl says that a write root does not
// exist, once, and not through the lstat behind it.
func TestMissingWriteRootIsNamed(t *testing.T) {
	f := newFixture(t)
	missing := f.path("not-made")
	r := sandboxctl(t, f.dir, "run", "--write", missing, "--", trueCmd)
	if r.code != 125 || !strings.Contains(r.stderr, missing+" does not exist; create it first") ||
		strings.Count(r.stderr, "start session") != 1 || strings.Contains(r.stderr, "lstat") {
		t.Errorf("exit %d, stderr %q; want 125 and %q said once", r.code, r.stderr, missing+" does not exist; create it first")
	}
}

// TestSandboxUIDHasAName: in the sandbox its uid and gid have names, the
// host's or a generated "sandbox", so shells do not say "I have no name!".
func TestSandboxUIDHasAName(t *testing.T) {
	want, named := "sandbox sandbox", false
	if u, err := user.LookupId(strconv.Itoa(suite.uid)); err == nil {
		if g, err := user.LookupGroupId(strconv.Itoa(suite.gid)); err == nil {
			want, named = u.Username+" "+g.Name, true
		}
	}
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			s := run(t, commandStart(path == "pty", nil, nil, "/bin/sh", "-c", `echo "names: $(id -un) $(id -gn)"`), nil)
			if s.err != nil {
				t.Fatalf("session: %v\n%s", s.err, s)
			}
			if s.res.Enforcement.GetMechanismSet() == "landlock" && !named {
				t.Skip("the landlock set has no mount namespace in which to give an unnamed sandbox uid a name")
			}
			if !strings.Contains(s.stdout, "names: "+want) {
				t.Errorf("want %q in the output\n%s", "names: "+want, s)
			}
		})
	}
}

// TestChildWritesRootCallersWorkspace: a child of a root caller's session
// writes the workspace it inherits as its parent does, and what it writes
// is root's on the host.
func TestChildWritesRootCallersWorkspace(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws, _ := rootWorkspace(f)
			script := fmt.Sprintf(`%s run -- %s write %s/by-child 2>&1; echo "rc=$?"`, suite.sandboxctl, suite.probe, ws)
			s := run(t, commandStart(path == "pty", supervisorPolicy(ws), nil, "/bin/sh", "-c", script), nil)
			if childrenRefused(t, s.err) {
				return
			}
			if !idmapsHere() {
				wantUnusable(t, s, ws)
				return
			}
			exitedCleanly(t, s)
			if rc := rcOf(s.stdout); rc != 0 {
				t.Fatalf("the child: exit %d\n%s", rc, s)
			}
			checkSteps(t, []step{allow("write", ws+"/by-child")}, parseOutcomes(s.stdout), s.String())
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(ws, "by-child"), &st); err != nil || st.Uid != 0 || st.Gid != 0 {
				t.Errorf("by-child on the host: %v, owner %d:%d; want root's", err, st.Uid, st.Gid)
			}
		})
	}
}

// TestWriteRootWithoutIDMappingIsRefused: a root-owned write root on a
// filesystem that cannot map owners (ramfs, as NFS or FUSE) is refused,
// naming it, its owner and mode and the uid, never granted unwritable.
func TestWriteRootWithoutIDMappingIsRefused(t *testing.T) {
	if !suite.asRoot {
		t.Skip("mounting the ramfs this case needs takes root; the unprivileged suite's refusal is TestRootCallersWorkspace's")
	}
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := f.path("ramfs")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mount("ramfs", ws, "ramfs", 0, "mode=0700"); err != nil {
				t.Fatalf("mount ramfs: %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(ws, syscall.MNT_DETACH) })
			s := run(t, commandStart(path == "pty", fsPolicy(list(ws), nil, nil), nil, "/bin/sh", "-c", "touch "+ws+"/x"), nil)
			wantUnusable(t, s, ws)
			if idmapsHere() && !strings.Contains(s.err.Error(), "ID-mapped mounts do not work for it") {
				t.Errorf("the refusal %q does not say the filesystem cannot map owners", s.err)
			}
			absent(t, filepath.Join(ws, "x"))
		})
	}
}

// TestNonRootCallersWorkspace: on a root daemon, a caller that is not root
// writes a root through a group of its own, which its sandbox (run with the
// caller's primary group alone) gets back on that root, and what it makes
// is the caller's and that group's; a root the caller could not write is
// never mapped for it.
func TestNonRootCallersWorkspace(t *testing.T) {
	if !suite.asRoot {
		t.Skip("needs root to act as another user; the rootless run has one user")
	}
	const user, team = 4242, 4646
	args := []string{"--socket-group", strconv.Itoa(user)}
	if suite.mechanism != "" {
		args = append(args, "--mechanism", suite.mechanism)
	}
	d, err := startDaemonWith(filepath.Join(suite.root, "ws-authz"), suite.wrap, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	f := newFixture(t)
	shared, private := f.path("team"), f.path("private")
	for dir, id := range map[string]int{shared: team, private: 0} {
		if err := os.Mkdir(dir, 0o770); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 0, id); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o770); err != nil {
			t.Fatal(err)
		}
	}
	as := func(groups []uint32, root string) cliResult {
		t.Helper()
		return sandboxctlAs(t, credentialOf(user, groups), d.socket, f.dir, "run", "--write", root, "--", "/bin/sh", "-c", `echo x > "$0/made"`, root)
	}
	refused := func(r cliResult, what string, say ...string) {
		t.Helper()
		if r.code != client.ExitDaemonFailed {
			t.Errorf("%s: exit %d, want %d (refused); stderr %q", what, r.code, client.ExitDaemonFailed, r.stderr)
		}
		for _, s := range say {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%s: the refusal %q does not say %q", what, r.stderr, s)
			}
		}
	}

	r := as([]uint32{user, team}, shared)
	if suite.mechanism == "landlock" || !linuxHost.namespaces {
		refused(r, "the team's root on the landlock set", shared, fmt.Sprintf("uid %d", user))
	} else {
		if r.code != 0 {
			t.Fatalf("the team's root, as a member: exit %d, stderr %q", r.code, r.stderr)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(shared, "made"), &st); err != nil || st.Uid != user || st.Gid != team {
			t.Errorf("made on the host: %v, owner %d:%d; want %d:%d", err, st.Uid, st.Gid, user, team)
		}
	}
	refused(as([]uint32{user}, shared), "the team's root, as a stranger", shared, fmt.Sprintf("uid %d", user))
	refused(as([]uint32{user, team}, private), "root's own root", private, fmt.Sprintf("uid %d", user))
	absent(t, filepath.Join(private, "made"))
}
