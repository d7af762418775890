package conformance

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// TestDaemonKilledLeavesNoGaps kills a daemon with SIGKILL while a
// detached session runs, then starts another on the same state directory:
// the new one must write the end the dead one never wrote ("daemon died"),
// remove the placeholder directory, the cgroups and the mounts the dead one
// made, and say so in its log. No mount beneath the test's directory
// survives the daemons.
func TestDaemonKilledLeavesNoGaps(t *testing.T) {
	f := newFixture(t)
	unmountAtCleanup(t, f.dir)
	dir := f.path("run")
	d, err := startDaemonWith(dir, suite.wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !d.dead() {
			d.kill()
		}
	})
	c := dialDaemon(t, d)
	marker := "killed-" + randomHex()
	// A carve-out that does not exist gets a placeholder directory on the
	// host; a limit gets the session a cgroup in the daemon's.
	// The write root beside the daemon's directory, not holding it: the
	// landlock set cannot keep the daemon's state out of a root that holds
	// it, and refuses one.
	work := f.mkdir("w")
	placeholder := filepath.Join(work, "made/by/daemon")
	p := fsPolicy(list(work), list(placeholder), nil)
	// The landlock set makes no placeholders: it refuses carve-outs
	// inside write roots; the session then has only its cgroup and its
	// audit record to leave behind.
	placeholders := linuxHost.namespaces && suite.mechanism != "landlock"
	if !placeholders {
		p = fsPolicy(list(work), nil, nil)
	}
	if !suite.noCgroup {
		p.Limits = &sandboxdv1.Limits{Pids: 64}
	}
	st := probeStart(false, p, nil, "hold", marker)
	st.Detach = true
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	res, err := c.Run(ctx, client.RunOptions{Start: st})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	id := res.SessionID
	for deadline := time.Now().Add(10 * time.Second); len(processesWith(marker)) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("session %s never ran", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill()
	for deadline := time.Now().Add(10 * time.Second); len(processesWith(marker)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("sandboxed processes survived their daemon")
		}
		time.Sleep(20 * time.Millisecond)
	}

	if _, err := os.Lstat(placeholder); placeholders && err != nil {
		t.Fatalf("no placeholder on the host before the restart: %v", err)
	}
	noMountsBeneath(t, f.dir, "after its daemon was killed")
	// A daemon killed while its layer store ran the storage library's
	// overlay probes, the first time the store opened, left a probe's
	// overlay mounted in its state directory. That is made here as the
	// probe makes it: the kill cannot be timed to land there.
	var probeMount string
	if suite.asRoot && len(suite.wrap) == 0 {
		probeMount = mountOverlayProbe(t, d.state)
	}
	var cgroupDirs []string
	if len(suite.wrap) == 0 && !suite.noCgroup {
		cgroupDirs = daemonCgroups(d.cmd.Process.Pid)
		if len(cgroupDirs) == 0 {
			t.Fatalf("no cgroup of daemon %d before the restart", d.cmd.Process.Pid)
		}
	}

	d2, err := startDaemonWith(dir, suite.wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d2.stop)
	for _, p := range []string{placeholder, filepath.Join(work, "made/by"), filepath.Join(work, "made")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("placeholder %s of the dead daemon is still there after the next started", p)
		}
	}
	for _, dir := range cgroupDirs {
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("cgroup %s of the dead daemon is still there after the next started", dir)
		}
		if !strings.Contains(d2.logTail(), dir) {
			t.Errorf("the new daemon's log does not say it removed %s:\n%s", dir, d2.logTail())
		}
	}
	noMountsBeneath(t, f.dir, "after the next daemon started")
	if probeMount != "" && !strings.Contains(d2.logTail(), probeMount) {
		t.Errorf("the new daemon's log does not say it unmounted %s:\n%s", probeMount, d2.logTail())
	}
	if placeholders && !strings.Contains(d2.logTail(), placeholder) {
		t.Errorf("the new daemon's log does not say it removed %s:\n%s", placeholder, d2.logTail())
	}
	var ends []auditLine
	for _, l := range readAudit(t, d2.state) {
		if l.Session == id && l.Type == "state" && (l.To == "killed" || l.To == "exited" || l.To == "failed-to-start") {
			ends = append(ends, l)
		}
	}
	if len(ends) != 1 || ends[0].Reason != "daemon died" {
		t.Errorf("end records of session %s after its daemon was killed and another started: %+v; want one, killed, reason \"daemon died\"", id, ends)
	}
	if !strings.Contains(d2.logTail(), id) {
		t.Errorf("the new daemon's log does not name the session it recorded as ended:\n%s", d2.logTail())
	}
	// Once written, the end is not written again by the next daemon.
	d2.stop()
	d3, err := startDaemonWith(dir, suite.wrap)
	if err != nil {
		t.Fatal(err)
	}
	d3.stop()
	n := 0
	for _, l := range readAudit(t, d3.state) {
		if l.Session == id && l.Reason == "daemon died" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d \"daemon died\" records of session %s after two restarts, want 1", n, id)
	}
	noMountsBeneath(t, f.dir, "after its daemons stopped")
}

// mountOverlayProbe mounts an overlay in the layer store of the state
// directory state where, and as, go.podman.io/storage's overlay driver
// mounts its probe of the kernel's overlay (supportsOverlay), and returns
// its mount point.
func mountOverlayProbe(t *testing.T, state string) string {
	t.Helper()
	probe := filepath.Join(state, "layers", "storage", "overlay", "compat"+strconv.FormatUint(rand.Uint64(), 10))
	for _, d := range []string{"lower1", "lower2", "upper", "work", "merged"} {
		if err := os.MkdirAll(filepath.Join(probe, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(probe, "merged")
	opts := fmt.Sprintf("lowerdir=%s:%s,upperdir=%s,workdir=%s",
		filepath.Join(probe, "lower1"), filepath.Join(probe, "lower2"), filepath.Join(probe, "upper"), filepath.Join(probe, "work"))
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount an overlay as the storage library's probe does: %v", err)
	}
	return merged
}

// unmountAtCleanup unmounts, once the test and its other clean-ups are
// done, what is still mounted beneath dir: a failing test must not leave
// mounts on the host.
func unmountAtCleanup(t *testing.T, dir string) {
	t.Cleanup(func() {
		if mounts, err := unmountBeneath(dir); len(mounts) > 0 || err != nil {
			t.Logf("unmounted what was left beneath %s: %q %v", dir, mounts, err)
		}
	})
}

// TestAuditLogFull: with its state directory on a full filesystem the
// daemon refuses new sessions (Unavailable, saying why), logs and counts
// the refusal, runs nothing, and starts sessions again once the audit log
// can be written.
func TestAuditLogFull(t *testing.T) {
	if !suite.asRoot {
		t.Skip("mounting a tmpfs needs root")
	}
	f := newFixture(t)
	state := f.mkdir("state")
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(state, syscall.MNT_DETACH) })
	d, err := startDaemonWith(f.path("run"), suite.wrap, "--state-dir", state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	c := dialDaemon(t, d)
	t.Cleanup(func() { c.Close() })
	runOn(t, c, commandStart(false, nil, nil, trueCmd))

	filler := filepath.Join(state, "filler")
	fill(t, filler)
	// Beside the daemon's state, not holding it (the landlock set refuses
	// a write root that holds it).
	work := f.mkdir("w")
	// The audit log's last page may still hold a record or two: the
	// session whose start fits there runs, and the next is refused.
	refused := false
	for i := range 3 {
		ran := filepath.Join(work, "ran"+strconv.Itoa(i))
		ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
		res, err := c.Run(ctx, client.RunOptions{Start: probeStart(false, fsPolicy(list(work), nil, nil), nil, "write", ran)})
		cancel()
		if err == nil {
			t.Logf("session %d ran with the filesystem full: exit %v", i, res.Exit)
			continue
		}
		if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "audit log") {
			t.Fatalf("session with the audit log full: %v, want Unavailable saying the audit log cannot be written", err)
		}
		absent(t, ran)
		refused = true
		break
	}
	if !refused {
		t.Fatal("sessions still run with the audit log's filesystem full")
	}
	if !strings.Contains(d.logTail(), "refused") {
		t.Errorf("the refusal is not in the daemon's log:\n%s", d.logTail())
	}
	if !strings.Contains(metricsText(t, d), `sandboxd_refusals_total{field="audit_log"}`) {
		t.Errorf("the refusal is not counted in sandboxd_refusals_total{field=\"audit_log\"}")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(work, "ran-again")
	runOn(t, c, probeStart(false, fsPolicy(list(work), nil, nil), nil, "write", ran))
	unchanged(t, ran, payload)
}

// daemonCgroups are the directories of the daemon with pid in the cgroup
// hierarchies (named sandboxd-PID, see launcher_linux).
func daemonCgroups(pid int) []string {
	var out []string
	name := "sandboxd-" + strconv.Itoa(pid)
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == name {
			out = append(out, p)
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// fill writes path until its filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := out.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			return
		}
	}
}
