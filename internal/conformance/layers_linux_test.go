package conformance

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// layersHere says whether the suite's daemon makes copy-on-write layers:
// a root daemon on the namespaces set. Everywhere else (a rootless daemon,
// which cannot mount overlay in the host's mount namespace, or the
// landlock set, which has no mount namespace to show the layer in) a
// layered launch must be refused, never run on the path itself.
func layersHere() bool {
	return suite.asRoot && linuxHost.namespaces && suite.mechanism != "landlock" && len(suite.wrap) == 0
}

// layerScript changes a workspace in every way a tool does, from inside
// it, and tries its read-only .git and its denied .env.
const layerScript = `set -e
echo new > created
echo after >> edit
rm gone
mv old-name new-name
chmod 0755 exec
ln -s edit link
mkdir -p newdir/sub
echo deep > newdir/sub/file
rm -r dir
if touch .git/x 2>/dev/null; then echo git-writable; else echo git-read-only; fi
if cat .env 2>/dev/null; then echo env-read; else echo env-denied; fi
echo ok-layer`

// layerWorkspace is a root caller's repository as the README's is: root's,
// with a .git and an .env. A rootless suite uses a directory of its own.
func layerWorkspace(t *testing.T, f *fixture) string {
	t.Helper()
	ws := f.path("ws")
	files := map[string]string{
		"edit": "before\n", "gone": "gone\n", "old-name": "moved\n", "exec": "#!/bin/sh\n",
		"dir/inner": "inner\n", ".git/config": "[core]\n", ".env": "TOKEN=secret\n",
	}
	for p, content := range files {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// snapshot is a tree's paths with their type, mode, owner and content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for p, v := range want {
		if got[p] != v {
			t.Errorf("%s: %s is %q, want %q", what, p, got[p], v)
		}
	}
	for p, v := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s is there (%q), want it not", what, p, v)
		}
	}
}

// wantLayerRefused fails unless s was refused for filesystem.layer with a
// remedy.
func wantLayerRefused(t *testing.T, s *session) {
	t.Helper()
	u := client.UnenforceableFrom(s.err)
	if u == nil || u.GetField() != "filesystem.layer" || u.GetRemedy() == "" || s.exitCode() != client.ExitDaemonFailed {
		t.Fatalf("want a refusal of filesystem.layer with a remedy (exit 125), got %v (exit %d)\n%s", s.err, s.exitCode(), s)
	}
	t.Logf("refused: %v", s.err)
}

func layerStart(tty bool, p *sandboxdv1.Policy, cwd string, argv ...string) *sandboxdv1.Start {
	st := commandStart(tty, p, nil, argv...)
	st.Command.Cwd = cwd
	return st
}

func layerCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	t.Cleanup(cancel)
	return ctx
}

func changesOf(diffs []*sandboxdv1.LayerDiff) map[string]string {
	out := map[string]string{}
	for _, d := range diffs {
		for _, c := range d.GetChanges() {
			out[c.GetPath()] = c.GetKind().String()
		}
	}
	return out
}

// TestLayerKeepsChangesOffTheHostUntilCommit: every kind of change a
// command makes under a layered path (create, edit, delete, rename, mode,
// symlink, directories) is invisible on the host, listed by diff, and
// exact on the host after commit, new files as the path's owner's; the
// read-only .git and the denied .env inside the layer hold as inside a
// write root.
func TestLayerKeepsChangesOffTheHostUntilCommit(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			before := snapshot(t, ws)
			pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
				Layer: []string{ws}, ReadOnly: []string{ws + "/.git"}, Deny: []string{ws + "/.env"},
			}}
			s := run(t, layerStart(path == "pty", pol, ws, "/bin/sh", "-c", layerScript), nil)
			sameTree(t, "host after the session", snapshot(t, ws), before)
			if !layersHere() {
				wantLayerRefused(t, s)
				return
			}
			if s.err != nil || s.exitCode() != 0 || !strings.Contains(s.stdout, "ok-layer") {
				t.Fatalf("session: %v, exit %d\n%s", s.err, s.exitCode(), s)
			}
			for _, want := range []string{"git-read-only", "env-denied"} {
				if !strings.Contains(s.stdout, want) {
					t.Errorf("inside the layer: want %s\n%s", want, s)
				}
			}
			enforcedBy(t, s, "filesystem.layer")
			id := s.res.SessionID
			ctx := layerCtx(t)
			diffs, err := suite.client.Diff(ctx, id, true)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"created": "ADDED", "edit": "MODIFIED", "gone": "DELETED", "old-name": "DELETED", "new-name": "ADDED",
				"exec": "MODE", "link": "ADDED", "newdir": "ADDED", "newdir/sub": "ADDED", "newdir/sub/file": "ADDED", "dir": "DELETED",
			}
			if got := changesOf(diffs); !mapsEqual(got, want) {
				t.Errorf("diff = %v, want %v", got, want)
			}
			if p := diffs[0].GetPatch(); !strings.Contains(p, "+after\n") || !strings.Contains(p, "+++ b/created") {
				t.Errorf("the patch lacks the edit or the new file:\n%s", p)
			}
			if _, err := suite.client.Commit(ctx, id, false); err != nil {
				t.Fatal(err)
			}
			wantAfter := map[string]string{}
			for p, v := range before {
				wantAfter[p] = v
			}
			for _, p := range []string{"gone", "old-name", "dir", "dir/inner"} {
				delete(wantAfter, p)
			}
			owner := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
			wantAfter["created"] = "-rw-r--r-- " + owner + " new\n"
			wantAfter["edit"] = "-rw-r--r-- " + owner + " before\nafter\n"
			wantAfter["new-name"] = "-rw-r--r-- " + owner + " moved\n"
			wantAfter["exec"] = "-rwxr-xr-x " + owner + " #!/bin/sh\n"
			wantAfter["link"] = "Lrwxrwxrwx " + owner + " -> edit"
			wantAfter["newdir"] = "drwxr-xr-x " + owner
			wantAfter["newdir/sub"] = "drwxr-xr-x " + owner
			wantAfter["newdir/sub/file"] = "-rw-r--r-- " + owner + " deep\n"
			sameTree(t, "host after commit", snapshot(t, ws), wantAfter)
			if _, err := suite.client.Diff(ctx, id, false); status.Code(errors.Unwrap(err)) != codes.NotFound && status.Code(err) != codes.NotFound {
				t.Errorf("diff after commit: %v, want NotFound", err)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// layerRun runs script in a session with a layer of ws and returns its id;
// where the daemon makes no layers it checks the refusal and skips.
func layerRun(t *testing.T, tty bool, ws, from, script string) string {
	t.Helper()
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{ws}}}
	if from != "" {
		pol = nil
	}
	st := layerStart(tty, pol, ws, "/bin/sh", "-c", script)
	st.LayerFrom = from
	s := run(t, st, nil)
	if !layersHere() {
		wantLayerRefused(t, s)
		t.SkipNow()
	}
	if s.err != nil || s.exitCode() != 0 {
		t.Fatalf("session: %v, exit %d\n%s", s.err, s.exitCode(), s)
	}
	return s.res.SessionID
}

// TestLayerDiscardLeavesTheHostAsItWas: a discarded layer's changes never
// reach the host, and the layer is gone.
func TestLayerDiscardLeavesTheHostAsItWas(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			before := snapshot(t, ws)
			id := layerRun(t, path == "pty", ws, "", "echo x > added; rm gone; echo y >> edit")
			ctx := layerCtx(t)
			if err := suite.client.Discard(ctx, id); err != nil {
				t.Fatal(err)
			}
			sameTree(t, "host after discard", snapshot(t, ws), before)
			layers, err := suite.client.Layers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				if l.GetSessionId() == id {
					t.Errorf("layer still listed after discard: %v", l)
				}
			}
		})
	}
}

// TestLayerCommitRefusesWhatChangedOnTheHost: a file the layer changes
// that changed on the host since the layer was made stops the commit,
// which names it and applies nothing; --force applies the layer over it.
func TestLayerCommitRefusesWhatChangedOnTheHost(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			id := layerRun(t, path == "pty", ws, "", "echo sandbox > edit; echo new > created")
			if err := os.WriteFile(filepath.Join(ws, "edit"), []byte("host\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx := layerCtx(t)
			_, err := suite.client.Commit(ctx, id, false)
			if status.Code(errors.Unwrap(err)) != codes.FailedPrecondition && status.Code(err) != codes.FailedPrecondition || !strings.Contains(fmt.Sprint(err), "edit") {
				t.Fatalf("commit over a file changed on the host: %v, want FAILED_PRECONDITION naming edit", err)
			}
			if strings.Contains(fmt.Sprint(err), "created") {
				t.Errorf("the refusal names a file only the layer changed: %v", err)
			}
			unchanged(t, filepath.Join(ws, "edit"), "host\n")
			if _, err := os.Lstat(filepath.Join(ws, "created")); err == nil {
				t.Error("a refused commit applied created")
			}
			if _, err := suite.client.Commit(ctx, id, true); err != nil {
				t.Fatal(err)
			}
			unchanged(t, filepath.Join(ws, "edit"), "sandbox\n")
			unchanged(t, filepath.Join(ws, "created"), "new\n")
		})
	}
}

// TestLayerWithinAWriteRootMovedByTheSandbox: a sandbox whose layer is
// within one of its write roots moves the layer's parent away and puts a
// symlink to another directory in its place before it ends. The diff and
// the commit, force or not, are refused (FAILED_PRECONDITION) rather than
// read and write, as root, where the symlink leads; the layer can still
// be discarded.
func TestLayerWithinAWriteRootMovedByTheSandbox(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			root := f.mkdir("w")
			ws := f.mkdir("w/x/proj")
			outside := f.mkdir("outside/proj")
			pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{root}, Layer: []string{ws}}}
			script := fmt.Sprintf("set -e; echo planted > x/proj/planted; mv x x.real; ln -s %s x; echo ok-moved", filepath.Dir(outside))
			s := run(t, layerStart(path == "pty", pol, root, "/bin/sh", "-c", script), nil)
			if !layersHere() {
				wantLayerRefused(t, s)
				return
			}
			if s.err != nil || s.exitCode() != 0 || !strings.Contains(s.stdout, "ok-moved") {
				t.Fatalf("session: %v, exit %d\n%s", s.err, s.exitCode(), s)
			}
			id := s.res.SessionID
			ctx := layerCtx(t)
			precondition := func(err error) bool {
				return status.Code(errors.Unwrap(err)) == codes.FailedPrecondition || status.Code(err) == codes.FailedPrecondition
			}
			if d, err := suite.client.Diff(ctx, id, true); !precondition(err) || !strings.Contains(fmt.Sprint(err), ws) {
				t.Errorf("diff of a layer whose parent the sandbox moved: %v %v, want FAILED_PRECONDITION naming %s", d, err, ws)
			}
			for _, force := range []bool{false, true} {
				if _, err := suite.client.Commit(ctx, id, force); !precondition(err) || !strings.Contains(fmt.Sprint(err), ws) {
					t.Errorf("commit (force %v) of a layer whose parent the sandbox moved: %v, want FAILED_PRECONDITION naming %s", force, err, ws)
				}
			}
			if _, err := os.Lstat(filepath.Join(outside, "planted")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the commit wrote where the sandbox's symlink leads: %v", err)
			}
			if err := suite.client.Discard(ctx, id); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLayerStacking: sessions started on an ended session's layer see what
// it left, diverge without seeing each other, and one of them is
// committed with its base while the other is dropped.
func TestLayerStacking(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			tty := path == "pty"
			base := layerRun(t, tty, ws, "", "echo checkpoint > step")
			a := layerRun(t, tty, ws, base, `test "$(cat step)" = checkpoint; echo a > try-a`)
			b := layerRun(t, tty, ws, base, `test "$(cat step)" = checkpoint; test ! -e try-a; echo b > try-b; rm edit`)
			ctx := layerCtx(t)
			da, err := suite.client.Diff(ctx, a, false)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := changesOf(da), map[string]string{"step": "ADDED", "try-a": "ADDED"}; !mapsEqual(got, want) {
				t.Errorf("diff of a = %v, want %v", got, want)
			}
			if da[0].GetLayer().GetParentSessionId() != base {
				t.Errorf("a's layer names parent %q, want %s", da[0].GetLayer().GetParentSessionId(), base)
			}
			if err := suite.client.Discard(ctx, base); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition && status.Code(err) != codes.FailedPrecondition {
				t.Errorf("discard of a layer others stand on: %v, want FAILED_PRECONDITION", err)
			}
			if err := suite.client.Discard(ctx, b); err != nil {
				t.Fatal(err)
			}
			if _, err := suite.client.Commit(ctx, a, false); err != nil {
				t.Fatal(err)
			}
			unchanged(t, filepath.Join(ws, "step"), "checkpoint\n")
			unchanged(t, filepath.Join(ws, "try-a"), "a\n")
			unchanged(t, filepath.Join(ws, "edit"), "before\n")
			if _, err := os.Lstat(filepath.Join(ws, "try-b")); err == nil {
				t.Error("the discarded continuation reached the host")
			}
			if err := suite.client.Discard(ctx, base); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLayerLimitEndsTheSession: a layer growing past limits.layer_bytes
// ends its session, killed with the limit as the reason.
func TestLayerLimitEndsTheSession(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			pol := &sandboxdv1.Policy{
				Filesystem: &sandboxdv1.Filesystem{Layer: []string{ws}},
				Limits:     &sandboxdv1.Limits{LayerBytes: 64 << 10},
			}
			s := run(t, layerStart(path == "pty", pol, ws, "/bin/sh", "-c", "head -c 1048576 /dev/zero > big; exec sleep 50"), nil)
			if !layersHere() {
				wantLayerRefused(t, s)
				return
			}
			e := s.exit()
			if e.GetState() != sandboxdv1.State_KILLED || !strings.Contains(e.GetReason(), "limits.layer_bytes") {
				t.Fatalf("exit %v, want KILLED for limits.layer_bytes\n%s", e, s)
			}
			ctx := layerCtx(t)
			if err := suite.client.Discard(ctx, s.res.SessionID); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLayerThatCannotBeMeasuredEndsTheSession: a sandbox keeping its
// layer from being measured, by nesting directories beyond PATH_MAX, does
// not so escape limits.layer_bytes: its session ends once the measures
// have failed for a while.
func TestLayerThatCannotBeMeasuredEndsTheSession(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			pol := &sandboxdv1.Policy{
				Filesystem: &sandboxdv1.Filesystem{Layer: []string{ws}},
				Limits:     &sandboxdv1.Limits{LayerBytes: 64 << 10},
			}
			// Nested from the bottom up, by names no longer than two
			// components: the shell cannot reach a path too long to name.
			nest := `n=$(printf '%0200d' 0); mkdir $n; i=0; while [ $i -lt 25 ]; do mkdir t && mv $n t/ && mv t $n || exit 1; i=$((i+1)); done; exec sleep 50`
			s := run(t, layerStart(path == "pty", pol, ws, "/bin/sh", "-c", nest), nil)
			if !layersHere() {
				wantLayerRefused(t, s)
				return
			}
			e := s.exit()
			if e.GetState() != sandboxdv1.State_KILLED || !strings.Contains(e.GetReason(), "could not be measured") {
				t.Fatalf("exit %v, want KILLED as its layer could not be measured\n%s", e, s)
			}
			ctx := layerCtx(t)
			if err := suite.client.Discard(ctx, s.res.SessionID); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLayerOutlivesADaemonKilledMidSession: a daemon killed with SIGKILL
// while a session runs on a layer leaves nothing mounted, and, started
// again, finds the layer whole: diffable and committable.
func TestLayerOutlivesADaemonKilledMidSession(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			unmountAtCleanup(t, f.dir)
			ws := layerWorkspace(t, f)
			d, err := startDaemon(f.path("run"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if !d.dead() {
					d.kill()
				}
			})
			c := dialDaemon(t, d)
			st := layerStart(path == "pty", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{ws}}}, ws,
				"/bin/sh", "-c", "echo made > made; exec sleep 60")
			st.Detach = true
			ctx := layerCtx(t)
			res, err := c.Run(ctx, client.RunOptions{Start: st})
			if !layersHere() {
				if u := client.UnenforceableFrom(err); u == nil || u.GetField() != "filesystem.layer" {
					t.Fatalf("want a refusal of filesystem.layer, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				diffs, err := c.Diff(ctx, res.SessionID, false)
				if err == nil && changesOf(diffs)["made"] == "ADDED" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the session never wrote its file: %v %v", diffs, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The overlays are detached: not in the daemon's mount table,
			// so none is left in it either.
			store := filepath.Join(d.state, "layers")
			noMountsBeneath(t, store, "while the session runs")
			c.Close()
			d.kill()
			d2, err := startDaemonWith(filepath.Dir(d.socket), suite.wrap, daemonArgs()...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d2.kill)
			noMountsBeneath(t, f.dir, "after the restart")
			c2 := dialDaemon(t, d2)
			diffs, err := c2.Diff(ctx, res.SessionID, false)
			if err != nil || !mapsEqual(changesOf(diffs), map[string]string{"made": "ADDED"}) {
				t.Fatalf("the layer after the restart: %v %v", diffs, err)
			}
			if _, err := c2.Commit(ctx, res.SessionID, false); err != nil {
				t.Fatal(err)
			}
			unchanged(t, filepath.Join(ws, "made"), "made\n")
		})
	}
}

// daemonArgs are the flags startDaemon gives the suite's daemon.
func daemonArgs() []string {
	var args []string
	if suite.mechanism != "" {
		args = append(args, "--mechanism", suite.mechanism)
	}
	return args
}

// TestReadmeReviewWorkflow runs the README's "Review what a command
// changed" blocks as written, every line of which must succeed, where the
// daemon makes layers (its own conformance cases cover the refusal).
func TestReadmeReviewWorkflow(t *testing.T) {
	if !layersHere() {
		t.Skip("this daemon makes no layers: the README's review workflow needs a root daemon on the namespaces set")
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Review what a command changed\n")
	if start < 0 {
		t.Fatal("README has no section \"Review what a command changed\"")
	}
	end := strings.Index(text[start+1:], "\n## ")
	if end < 0 {
		end = len(text) - start - 1
	}
	section := text[start : start+1+end]
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) == 0 {
		t.Fatal("the review section has no shell block")
	}
	// A directory of its own for each run: the workflow makes its project
	// with git init and a first commit, which a second run in the same
	// place would find already made.
	root, err := os.MkdirTemp(suite.root, "readme-review-")
	if err == nil {
		err = os.Chmod(root, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\nexport PATH=" + filepath.Dir(suite.sandboxctl) + ":$PATH\n")
	for _, b := range blocks {
		script.WriteString(strings.ReplaceAll(b[1], "/var/tmp/", root+"/"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SANDBOXD_SOCKET="+suite.daemon.socket)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the review workflow failed: %v\n%s", err, out)
	}
	for _, want := range []string{"added", "changes committed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	if slices.Contains(strings.Fields(string(out)), "git-writable") {
		t.Errorf("the workflow wrote .git:\n%s", out)
	}
	t.Logf("review workflow output:\n%s", out)
}

// TestLayerCarveOutThatDoesNotExistYet: a read-only carve-out inside a
// layer that does not exist yet cannot be created by the command, and the
// placeholder that stands for it while the session runs is not a change of
// the layer.
func TestLayerCarveOutThatDoesNotExistYet(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws := layerWorkspace(t, f)
			pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{ws}, ReadOnly: []string{ws + "/.agent"}}}
			script := `if mkdir -p .agent/x 2>/dev/null || touch .agent/y 2>/dev/null; then echo agent-writable; else echo agent-read-only; fi; echo ok > created`
			s := run(t, layerStart(path == "pty", pol, ws, "/bin/sh", "-c", script), nil)
			if _, err := os.Lstat(filepath.Join(ws, ".agent")); err == nil {
				t.Error("the carve-out's placeholder was made on the host")
			}
			if !layersHere() {
				wantLayerRefused(t, s)
				return
			}
			if s.err != nil || !strings.Contains(s.stdout, "agent-read-only") {
				t.Fatalf("session: %v; want the carve-out read-only\n%s", s.err, s)
			}
			ctx := layerCtx(t)
			diffs, err := suite.client.Diff(ctx, s.res.SessionID, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := changesOf(diffs); !mapsEqual(got, map[string]string{"created": "ADDED"}) {
				t.Errorf("diff = %v, want only created", got)
			}
			if err := suite.client.Discard(ctx, s.res.SessionID); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLayersAreTheirOwnersOnly: on a root daemon another caller neither
// sees nor settles root's layers, nor starts on them, nor layers a
// directory that is not its own (a commit writes as root); its own
// directory it layers, and the commit leaves its files its own.
func TestLayersAreTheirOwnersOnly(t *testing.T) {
	if !layersHere() {
		t.Skip("this daemon makes no layers; the refusal has its own cases")
	}
	const user = 4242
	d, err := startDaemonWith(filepath.Join(suite.root, "layers-authz"), suite.wrap, "--socket-group", fmt.Sprint(user))
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	as := func(uid int, dir string, args ...string) cliResult {
		t.Helper()
		return sandboxctlAs(t, credentialOf(uid, []uint32{user}), d.socket, dir, args...)
	}
	f := newFixture(t)
	rootWS := layerWorkspace(t, f)
	r := as(0, rootWS, "run", "--layer", ".", "--json", "--", "/bin/sh", "-c", "echo root > by-root")
	m := regexp.MustCompile(`"session_id":\s*"([0-9a-f]+)"`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("root's layered run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	rootID := m[1]
	if l := as(user, "/", "layers"); l.code != 0 || strings.Contains(l.stdout, rootID) {
		t.Errorf("uid %d's layers list root's: exit %d\n%s%s", user, l.code, l.stdout, l.stderr)
	}
	for _, args := range [][]string{{"diff", rootID}, {"commit", rootID}, {"discard", rootID}, {"run", "--layer-from", rootID, "--", "/bin/true"}} {
		if r := as(user, "/", args...); r.code == 0 || !strings.Contains(strings.ToLower(r.stderr), "not found") {
			t.Errorf("uid %d: %v of root's layer: exit %d %q, want not found", user, args, r.code, r.stderr)
		}
	}
	if r := as(user, "/", "run", "--layer", rootWS, "--", "/bin/true"); r.code != client.ExitDaemonFailed || !strings.Contains(r.stderr, "only root may layer another's directory") {
		t.Errorf("uid %d layering root's directory: exit %d %q, want refused", user, r.code, r.stderr)
	}
	own := f.path("own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, user, user); err != nil {
		t.Fatal(err)
	}
	r = as(user, own, "run", "--layer", ".", "--json", "--", "/bin/sh", "-c", "echo mine > f")
	m = regexp.MustCompile(`"session_id":\s*"([0-9a-f]+)"`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("uid %d's layered run of its own directory: exit %d %q %q", user, r.code, r.stdout, r.stderr)
	}
	if c := as(user, own, "commit", m[1]); c.code != 0 {
		t.Fatalf("uid %d's commit: exit %d %q", user, c.code, c.stderr)
	}
	fi, err := os.Lstat(filepath.Join(own, "f"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != user {
		t.Errorf("the committed file: %v %v, want uid %d's", fi, err, user)
	}
	if c := as(0, rootWS, "discard", rootID); c.code != 0 {
		t.Errorf("root's discard: exit %d %q", c.code, c.stderr)
	}
}
