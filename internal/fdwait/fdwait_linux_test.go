package fdwait

import (
	"os"
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

func fd(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	rc.Control(func(fd uintptr) { n = int(fd) })
	return n
}

// settle waits until the dispatcher has handled every event up to now: a
// registration made after them, readable at once, has fired.
func settle(t *testing.T) {
	t.Helper()
	r, w := pipe(t)
	w.Write([]byte{0})
	fired := make(chan struct{})
	if _, err := AddOnce(fd(t, r), func() { close(fired) }); err != nil {
		t.Fatal(err)
	}
	<-fired
}

func TestFnStartsOncePerReadinessUntilRearmed(t *testing.T) {
	r, w := pipe(t)
	fired := make(chan struct{}, 8)
	reg, err := Add(fd(t, r), func() { fired <- struct{}{} })
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
	reg, err := Add(fd(t, r), func() { close(fired) })
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
	reg, err := Add(fd(t, r), func() { fired <- struct{}{} })
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
	reg, err := AddOnce(fd(t, r), func() { fired <- struct{}{} })
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
	reg2, err := Add(fd(t, r), func() { close(again) })
	if err != nil {
		t.Fatalf("register again after a one-time registration fired: %v", err)
	}
	defer reg2.Cancel()
	<-again
}
