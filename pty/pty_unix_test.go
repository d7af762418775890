//go:build unix

package pty

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func openPair(t *testing.T) (master, replica *os.File) {
	t.Helper()
	m, r, err := Open()
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { m.Close(); r.Close() })
	return m, r
}

func TestReplicaOutputReachesMaster(t *testing.T) {
	m, r := openPair(t)
	if _, err := r.Write([]byte("hello\n")); err != nil {
		t.Fatalf("write replica: %v", err)
	}
	got := make([]byte, 64)
	n, err := m.Read(got)
	if err != nil {
		t.Fatalf("read master: %v", err)
	}
	// The line discipline turns \n into \r\n on output.
	if want := "hello\r\n"; string(got[:n]) != want {
		t.Fatalf("master read %q, want %q", got[:n], want)
	}
}

func TestMasterInputReachesReplica(t *testing.T) {
	m, r := openPair(t)
	if _, err := m.Write([]byte("typed\n")); err != nil {
		t.Fatalf("write master: %v", err)
	}
	got := make([]byte, 64)
	n, err := r.Read(got)
	if err != nil {
		t.Fatalf("read replica: %v", err)
	}
	if want := "typed\n"; string(got[:n]) != want {
		t.Fatalf("replica read %q, want %q", got[:n], want)
	}
}

func TestResizeIsSeenOnReplica(t *testing.T) {
	m, r := openPair(t)
	if err := Resize(m, 33, 111); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ws *unix.Winsize
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) { ws, ioctlErr = unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ) }); err != nil {
		t.Fatal(err)
	}
	if ioctlErr != nil {
		t.Fatalf("TIOCGWINSZ: %v", ioctlErr)
	}
	if ws.Row != 33 || ws.Col != 111 {
		t.Fatalf("replica size %dx%d, want 33x111", ws.Row, ws.Col)
	}
}

func TestMasterReadEndsWhenReplicaCloses(t *testing.T) {
	m, r := openPair(t)
	if _, err := r.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	var out bytes.Buffer
	buf := make([]byte, 64)
	for {
		n, err := m.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			// Linux reports the hang-up as EIO, BSDs as EOF.
			if !errors.Is(err, syscall.EIO) && !errors.Is(err, io.EOF) {
				t.Fatalf("read after replica closed: %v", err)
			}
			break
		}
	}
	if out.String() != "last words" {
		t.Fatalf("drained %q, want output written before the close", out.String())
	}
}

func TestCloseInterruptsPendingMasterRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the master is only non-blocking on Linux")
	}
	m, _ := openPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := m.Read(make([]byte, 16))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	m.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("pending read returned %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt a pending Read on the master")
	}
}

func TestReadDeadlineOnMaster(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the master is only non-blocking on Linux")
	}
	m, _ := openPair(t)
	if err := m.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatalf("SetReadDeadline: %v", err)
	}
	if _, err := m.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read returned %v, want os.ErrDeadlineExceeded", err)
	}
}
