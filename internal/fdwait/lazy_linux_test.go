package fdwait

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func lazyPipe(t *testing.T) (*Lazy, *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	w := os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { w.Close() })
	return NewLazy(p[0], "r"), w
}

// waitFired fails the test if the waiter does not call back within 10 s,
// rather than hang it.
func waitFired(t *testing.T, fired <-chan struct{}) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not call back within 10s")
	}
}

// A Lazy waits in the waiter without a file; its first read makes one,
// and a resting reader's wait starts it again.
func TestLazyWaitsWithoutAFileAndReadsThroughOne(t *testing.T) {
	l, w := lazyPipe(t)
	defer l.Close()
	fired := make(chan struct{}, 1)
	reg, err := Add(l, func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Cancel()
	if l.f != nil {
		t.Fatal("registering a Lazy made its file")
	}
	w.Write([]byte("x"))
	waitFired(t, fired)
	f, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, err := f.Read(buf); err != nil || string(buf[:n]) != "x" {
		t.Fatalf("read %q, %v; want \"x\"", buf[:n], err)
	}
	// The registration now goes through the file.
	if err := reg.Rearm(); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("y"))
	waitFired(t, fired)
}

// Closing a Lazy that never made its file closes the descriptor, after
// which neither it nor its number is used.
func TestLazyClosedWithoutAFile(t *testing.T) {
	l, _ := lazyPipe(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.fd != -1 {
		t.Fatalf("the Lazy keeps descriptor %d after Close", l.fd)
	}
	rc, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	called := false
	if err := rc.Control(func(uintptr) { called = true }); !errors.Is(err, os.ErrClosed) || called {
		t.Fatalf("Control after Close: %v (fn called: %v), want os.ErrClosed", err, called)
	}
	if _, err := l.File(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("File after Close: %v, want os.ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("second Close: %v, want os.ErrClosed", err)
	}
}
