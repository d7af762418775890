package daemon

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestDrainKeepsOutputForASlowClient(t *testing.T) {
	sio, err := openStdio(false, nil, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	// The sandbox wrote a pipe's worth and is gone.
	want := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	if _, err := sio.child.Stdout.Write(want); err != nil {
		t.Fatal(err)
	}
	sio.closeChild()
	var mu sync.Mutex
	var got bytes.Buffer
	slowSend := func(o *sandboxdv1.Output) {
		// Each send takes longer than the grace period.
		time.Sleep(120 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		got.Write(o.GetData())
	}
	sio.startPumps(slowSend)
	sio.drain()
	sio.waitPumps()
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("drained %d of %d bytes", got.Len(), len(want))
	}
}

func TestDrainEndsWhenALeakedWriterKeepsThePipeOpen(t *testing.T) {
	sio, err := openStdio(false, nil, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	// Stands in for a process that escaped the backend's Kill holding the
	// write end: the daemon must not wait for it forever.
	leaked := sio.child.Stdout
	defer leaked.Close()
	sio.child.Stdin.Close()
	sio.child.Stderr.Close()
	sio.startPumps(func(*sandboxdv1.Output) {})
	done := make(chan struct{})
	go func() {
		sio.waitPumps()
		close(done)
	}()
	sio.drain()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("pump still waiting on a pipe held open by a leaked writer")
	}
}

func TestOutputReaderTakesEverythingAlreadyThereInOneRead(t *testing.T) {
	// A datagram socket hands out one write per read, as a terminal master
	// hands out one line-discipline buffer: what the coalescing is for.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fds[0]), "reader")
	w := os.NewFile(uintptr(fds[1]), "writer")
	defer r.Close()
	defer w.Close()
	for _, p := range []string{"one ", "two ", "three"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	read := outputReader(r)
	got, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "one two three" {
		t.Fatalf("one read returned %q, want everything written before it, %q", got, "one two three")
	}
	// Nothing is there now: the next read waits for the next write.
	go w.Write([]byte("four"))
	if got, err = read(); err != nil || string(got) != "four" {
		t.Fatalf("read after a write = %q, %v; want \"four\"", got, err)
	}
}

// goroutinesIn counts the goroutines whose stack passes through fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fn+"(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// An idle session's outputs wait in the shared waiter, not each with a
// goroutine parked on it; output that comes after a quiet spell still
// arrives whole and in order.
func TestQuietOutputHoldsNoGoroutine(t *testing.T) {
	sio, err := openStdio(false, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	got := make(chan string, 64)
	sio.startPumps(func(o *sandboxdv1.Output) { got <- string(o.GetData()) })
	const reader = "github.com/sandboxd/sandboxd/daemon.(*pump).run"
	for _, burst := range []string{"one", "two", "three"} {
		// Quiet: the reader gives its goroutine back once the output has
		// been so for outputLinger.
		for deadline := time.Now().Add(30 * time.Second); goroutinesIn(reader) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("a reader still waits on output quiet for 30s")
			}
		}
		if _, err := sio.child.Stdout.Write([]byte(burst)); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for b.Len() < len(burst) {
			b.WriteString(<-got)
		}
		if b.String() != burst {
			t.Fatalf("read %q after a quiet spell, want %q", b.String(), burst)
		}
	}
	sio.closeChild()
	sio.drain()
	sio.waitPumps()
	if n := goroutinesIn(reader); n > 0 {
		t.Fatalf("%d readers left after the outputs ended", n)
	}
}
