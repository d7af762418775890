package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stopSpawners ends sp's spawners, as the daemon's exit would.
func stopSpawners(sp *spawner) {
	for _, l := range sp.lanes {
		l.mu.Lock()
		if l.sock != nil {
			l.stop()
		}
		l.mu.Unlock()
	}
}

// A request that reached a spawner is not sent again when the spawner goes
// before it answers: it may have cloned an init with the request's fds,
// which runs on if its parent died before it set its parent-death signal,
// and a second init would share its plan pipe, report pipe and pass
// socket. The stand-in spawner here takes each request and exits without
// an answer, counting the requests it got.
func TestARequestReachesOneSpawnerOnly(t *testing.T) {
	head, err := exec.LookPath("head")
	if err != nil {
		t.Skip("no head(1) for the stand-in spawner")
	}
	dir := t.TempDir()
	got := filepath.Join(dir, "requests")
	script := filepath.Join(dir, "spawner")
	body := "#!/bin/sh\n" + head + " -c 1 <&3 >/dev/null && echo request >>" + got + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := newSpawner(script)
	defer stopSpawners(sp)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	uid, gid := sandboxIdentity()
	if h, err := sp.spawn(initKey{uid: uid, gid: gid}, [3]int{p[0], p[1], p[1]}); err == nil {
		h.pidfd.Close()
		t.Fatal("a spawner that went without answering started an init")
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "request"); n != 1 {
		t.Errorf("the request was sent %d times, want once", n)
	}
}

// firstInit starts a spawner of its own and an init through it, both ended
// with the test.
func firstInit(t *testing.T) (*spawner, initKey, *initProc) {
	uid, gid := sandboxIdentity()
	key := initKey{uid: uid, gid: gid}
	sp := newSpawner(initBinaryPath(t))
	t.Cleanup(func() { stopSpawners(sp) })
	first, err := startInit(sp, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.discard)
	return sp, key, first
}

// A send that fails for another reason than the spawner's going (memory,
// the fds in flight; here an fd that is not open) leaves the spawner
// running: stopping it would end every session it cloned, by their
// parent-death signal.
func TestAFailedSendKeepsTheSpawner(t *testing.T) {
	sp, key, first := firstInit(t)
	spawnerPid := parentOf(t, first.proc.pid)
	if _, err := sp.spawn(key, [3]int{-1, -1, -1}); !errors.Is(err, unix.EBADF) {
		t.Fatalf("spawn with fds that are not open: %v, want EBADF", err)
	}
	// The same lane, free again, serves the next request.
	second, err := startInit(sp, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer second.discard()
	if p := parentOf(t, second.proc.pid); p != spawnerPid {
		t.Errorf("the next init was cloned by spawner %d, want %d, which cloned the first: a failed send stopped it", p, spawnerPid)
	}
	if err := first.proc.signal(0); err != nil {
		t.Errorf("the first init after a failed send: %v", err)
	}
}

// A spawner that went while it served no request (killed) is started again
// for the next one.
func TestAGoneSpawnerIsStartedAgain(t *testing.T) {
	sp, key, first := firstInit(t)
	gone := parentOf(t, first.proc.pid)
	if err := syscall.Kill(gone, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Its files, the socket among them, are closed once it is a zombie
	// or reaped; the test's timeout catches one that stays.
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", gone))
		if err != nil {
			break
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	second, err := startInit(sp, key, 0)
	if err != nil {
		t.Fatalf("launch after the spawner went: %v", err)
	}
	defer second.discard()
	if p := parentOf(t, second.proc.pid); p == gone {
		t.Errorf("the init was cloned by spawner %d, which was killed", p)
	}
}

// A spawner whose poll fails for good (EINVAL: its RLIMIT_NOFILE, lowered
// here, is below the two fds it polls) exits rather than try again
// forever: a request would never be taken, the daemon would wait for its
// reply holding the lane, and a spawner that does not poll would not see
// the daemon end.
func TestASpawnerWhosePollFailsForGoodExits(t *testing.T) {
	_, _, first := firstInit(t)
	spawnerPid := parentOf(t, first.proc.pid)
	if err := unix.Prlimit(spawnerPid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1, Max: 1}, nil); err != nil {
		t.Fatalf("lower the spawner's RLIMIT_NOFILE: %v", err)
	}
	// The init's end (SIGCHLD) wakes the spawner; its next poll fails.
	if err := first.proc.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", spawnerPid))
		if err != nil {
			break
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spawner %d still runs 5 s after its poll failed with EINVAL", spawnerPid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
