//go:build linux

package layers

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fsids are the filesystem uid and gid of the thread whose status file
// is at status, as /proc shows them.
func fsids(t *testing.T, status string) (uid, gid string) {
	t.Helper()
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 5 && f[0] == "Uid:":
			uid = f[4]
		case len(f) == 5 && f[0] == "Gid:":
			gid = f[4]
		}
	}
	return uid, gid
}

// A thread whose credentials could not be set back after writing as a
// path's owner is not the caller's (a gRPC worker that goes on serving
// other calls): the caller's keeps root's ids, what was written stands,
// and no later write as an owner is made.
func TestAsKeepsTheOwnersIDsOffTheCallersThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// Another uid than the commits' of the other tests, which check that
	// no thread keeps theirs: the thread parked here does.
	owner := Owner{UID: 4321, GID: 4321, Groups: []uint32{4321}}
	testHookRestore = func(func() error) error { return errors.New("refused by the test") }
	t.Cleanup(func() { testHookRestore = nil; credsLost.Store(nil) })
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ran := false
	if err := owner.as(func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("a write as the owner whose thread could not be set back: ran %v, %v, want its own result, nil", ran, err)
	}
	if uid, gid := fsids(t, "/proc/thread-self/status"); uid != "0" || gid != "0" {
		t.Errorf("the caller's thread has fsuid %s and fsgid %s, want 0 and 0", uid, gid)
	}
	if credsLost.Load() == nil {
		t.Fatal("credsLost is not set")
	}
	testHookRestore = nil
	if err := owner.as(func() error { t.Error("a write as an owner ran after a thread could not be set back"); return nil }); err == nil {
		t.Error("a write as an owner after a thread could not be set back: nil, want an error")
	}
}

// After a commit as a path's owner, no thread of the daemon has that
// owner's filesystem ids (nor would one if the commit set them for all
// threads, as syscall.Setgroups does).
func TestCommitLeavesNoThreadWithTheOwnersIDs(t *testing.T) {
	s, ws, merged := userLayer(t, nil)
	write(t, filepath.Join(at(merged), "new"), "new\n")
	must(t, s.Release("s1"))
	if _, err := s.Commit("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "new")); err != nil {
		t.Fatal(err)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range tasks {
		if uid, gid := fsids(t, st); uid == "1234" || gid == "1234" {
			t.Errorf("%s: fsuid %s, fsgid %s after a commit as uid 1234", st, uid, gid)
		}
	}
}

// A commit whose thread could not be set back after a change stops
// there, and lists that change as applied: it was.
func TestCommitStoppedByAThreadNotSetBackListsItsChange(t *testing.T) {
	s, ws, merged := userLayer(t, nil)
	write(t, filepath.Join(at(merged), "new"), "new\n")
	must(t, s.Release("s1"))
	// The commit's writes as the owner: the check of the directory new
	// is made in, the opening of it, the link of new there.
	spans := 0
	testHookRestore = func(restore func() error) error {
		if err := restore(); err != nil {
			return err
		}
		if spans++; spans == 3 {
			return errors.New("refused by the test")
		}
		return nil
	}
	t.Cleanup(func() { testHookRestore = nil; credsLost.Store(nil) })
	_, err := s.Commit("s1", false, nil)
	var pe *PartialError
	if !errors.As(err, &pe) || len(pe.Applied) != 1 || pe.Applied[0].Path != "new" {
		t.Errorf("commit whose thread was not set back after adding new: %v, want a PartialError listing new", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "new")); err != nil {
		t.Errorf("new: %v", err)
	}
}
