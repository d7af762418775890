package daemon

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/fdwait/fdwaittest"
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

// pipeLength is f's length, or -1 with an error reported (t.Error: the
// watcher below calls it on a goroutine of its own).
func pipeLength(t *testing.T, f syscall.Conn) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Error(err)
		return -1
	}
	n := -1
	rc.Control(func(fd uintptr) { n, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) })
	if err != nil {
		t.Error(err)
		return -1
	}
	return n
}

// An idle session's pipes are a page long; stdin gets the usual length
// with its first input, an output while a reader reads a page at a time,
// and a page again once it rests.
func TestPipesArePageLongWhileIdle(t *testing.T) {
	sio, err := openStdio(false, nil, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	page := os.Getpagesize()
	if n := pipeLength(t, sio.stdin); n != page {
		t.Fatalf("stdin before input: %d bytes long, want a page (%d)", n, page)
	}
	if err := sio.write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := pipeLength(t, sio.stdin); n != 16*page {
		t.Fatalf("stdin after input: %d bytes long, want %d", n, 16*page)
	}

	var mu sync.Mutex
	var got int
	sio.startPumps(func(o *sandboxdv1.Output) {
		mu.Lock()
		defer mu.Unlock()
		got += len(o.GetData())
	})
	stdout := sio.outputs[0].file
	if n := pipeLength(t, stdout); n != page {
		t.Fatalf("stdout at start: %d bytes long, want a page", n)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	// More than a page at once: the sandbox's write waits for the reader,
	// whose full page makes the pipe long.
	// A watcher from before the write sees the length the reader gives it,
	// which it keeps for outputLinger after the last read.
	grew := make(chan bool)
	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if pipeLength(t, stdout) == 16*page {
				grew <- true
				return
			}
		}
		grew <- false
	}()
	big := bytes.Repeat([]byte("y"), 8*page)
	if _, err := sio.child.Stdout.Write(big); err != nil {
		t.Fatal(err)
	}
	if !<-grew {
		t.Fatal("stdout never grew while read a page at a time")
	}
	eventually("stdout never rested at a page", func() bool { return pipeLength(t, stdout) == page })
	mu.Lock()
	n := got
	mu.Unlock()
	if n != len(big) {
		t.Fatalf("read %d bytes of stdout, want %d", n, len(big))
	}
	sio.closeChild()
	sio.drain()
	sio.waitPumps()
}

// An idle pipe session's ends are not in the runtime's poller, which keeps
// 512 bytes for each descriptor it has ever held at once: its outputs wait
// in the shared waiter only, and stdin in none. A first write puts stdin
// in the poller; output that comes is read.
func TestIdlePipesStayOutOfTheRuntimesPoller(t *testing.T) {
	sio, err := openStdio(false, nil, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	got := make(chan string, 8)
	sio.startPumps(func(o *sandboxdv1.Output) { got <- string(o.GetData()) })
	in, out := fdwaittest.FD(t, sio.stdin), fdwaittest.FD(t, sio.outputs[0].file)
	if n := fdwaittest.EpollsHolding(t, in); n != 0 {
		t.Fatalf("stdin before input is in %d epoll instances, want none", n)
	}
	if n := fdwaittest.EpollsHolding(t, out); n != 1 {
		t.Fatalf("quiet stdout is in %d epoll instances, want 1 (the waiter's)", n)
	}
	if err := sio.write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := fdwaittest.EpollsHolding(t, in); n != 1 {
		t.Fatalf("stdin after input is in %d epoll instances, want 1 (the runtime's)", n)
	}
	if _, err := sio.child.Stdout.Write([]byte("out")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "out" {
			t.Fatalf("read %q from stdout, want %q", s, "out")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stdout's output did not come within 10s")
	}
	sio.closeChild()
	sio.drain()
	sio.waitPumps()
}
