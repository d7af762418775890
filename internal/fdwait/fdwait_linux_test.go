package fdwait

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// settle waits until the dispatcher has handled every event up to now: a
// registration made after them, readable at once, has fired.
func settle(t *testing.T) {
	t.Helper()
	r, w := pipe(t)
	w.Write([]byte{0})
	fired := make(chan struct{})
	if _, err := AddOnce(r, func() { close(fired) }); err != nil {
		t.Fatal(err)
	}
	<-fired
}

func TestFnStartsOncePerReadinessUntilRearmed(t *testing.T) {
	r, w := pipe(t)
	fired := make(chan struct{}, 8)
	reg, err := Add(r, func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Cancel()
	w.Write([]byte("x"))
	<-fired
	// Still readable, but disarmed until its owner rearms it.
	w.Write([]byte("y"))
	settle(t)
	if len(fired) != 0 {
		t.Fatal("fn started again before Rearm")
	}
	// Readable as it is rearmed: fn starts at once.
	if err := reg.Rearm(); err != nil {
		t.Fatal(err)
	}
	<-fired
}

func TestHangUpStartsFn(t *testing.T) {
	r, w := pipe(t)
	fired := make(chan struct{})
	reg, err := Add(r, func() { close(fired) })
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Cancel()
	w.Close()
	<-fired
}

func TestCancelledFnIsNotStarted(t *testing.T) {
	r, w := pipe(t)
	fired := make(chan struct{}, 1)
	reg, err := Add(r, func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	reg.Cancel()
	reg.Cancel()
	w.Write([]byte("x"))
	settle(t)
	if len(fired) != 0 {
		t.Fatal("fn started after Cancel")
	}
	if err := reg.Rearm(); err == nil {
		t.Fatal("Rearm after Cancel succeeded")
	}
}

func TestOnceIsGoneAfterItFired(t *testing.T) {
	r, w := pipe(t)
	fired := make(chan struct{}, 2)
	reg, err := AddOnce(r, func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	<-fired
	if err := reg.Rearm(); err == nil {
		t.Fatal("Rearm of a fired one-time registration succeeded")
	}
	// The descriptor can be registered again: the first is out of the
	// epoll set.
	again := make(chan struct{})
	reg2, err := Add(r, func() { close(again) })
	if err != nil {
		t.Fatalf("register again after a one-time registration fired: %v", err)
	}
	defer reg2.Cancel()
	<-again
}

// A registration cancelled after its file was closed, once the file's
// number names another registered file, leaves that one alone: Cancel
// names the descriptor only while the file is open.
func TestCancelAfterCloseSparesTheNumbersNextFile(t *testing.T) {
	r1, _ := pipe(t)
	reg1, err := Add(r1, func() {})
	if err != nil {
		t.Fatal(err)
	}
	n := r1.Fd()
	r1.Close()
	r2, w2 := pipe(t)
	if r2.Fd() != n {
		t.Skipf("the next pipe got fd %d, not the closed %d", r2.Fd(), n)
	}
	fired := make(chan struct{})
	reg2, err := Add(r2, func() { close(fired) })
	if err != nil {
		t.Fatal(err)
	}
	defer reg2.Cancel()
	reg1.Cancel()
	w2.Write([]byte("x"))
	<-fired
}

// A process out of descriptors cannot make the waiter: Ready says so, and
// tries again once it can, rather than keeping the failure.
func TestReadyReportsAndRetriesAFailedEpollCreate(t *testing.T) {
	waiterMu.Lock()
	saved := theWaiter
	theWaiter = nil
	waiterMu.Unlock()
	t.Cleanup(func() {
		waiterMu.Lock()
		theWaiter = saved
		waiterMu.Unlock()
	})
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// The lowest free descriptor, as the limit: nothing more can open.
	r, _ := pipe(t)
	low := lim
	low.Cur = uint64(r.Fd())
	r.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	err := Ready()
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, syscall.EMFILE) || !strings.Contains(err.Error(), "epoll_create1") {
		t.Fatalf("Ready out of descriptors: %v, want epoll_create1's EMFILE", err)
	}
	if _, err := Add(r, func() {}); err == nil {
		t.Fatal("Add of a closed file succeeded")
	}
	if err := Ready(); err != nil {
		t.Fatalf("Ready once descriptors are free again: %v", err)
	}
}

// A registration, which an idle session keeps for each of its outputs and
// its seccomp listener, is one small allocation besides the file's
// RawConn: what epoll_ctl needs is the waiter's, and rearming or removing
// it allocates nothing.
func TestARegistrationIsOneAllocation(t *testing.T) {
	r, _ := pipe(t)
	if err := Ready(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		reg, err := Add(r, func() {})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Rearm(); err != nil {
			t.Fatal(err)
		}
		reg.Cancel()
	})
	if allocs > 2 {
		t.Fatalf("Add, Rearm and Cancel allocate %v times, want 2 (the RawConn and the registration)", allocs)
	}
}
