package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// openPTY returns the replica side of a fresh pseudo-terminal, standing in
// for the user's terminal.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	_, replica := openPTYPair(t)
	return replica
}

// openPTYPair returns both sides of a fresh pseudo-terminal: what is
// written to master is what the user types on replica.
func openPTYPair(t *testing.T) (master, replica *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	replica, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })
	return master, replica
}

func TestRawModeIsRestored(t *testing.T) {
	tty := openPTY(t)
	fd := int(tty.Fd())
	if !isTerminal(fd) {
		t.Fatal("a pty is not a terminal")
	}
	before, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	restore, err := makeRaw(fd)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	// With ISIG, ICANON or ECHO left on, ^C would kill sandboxctl instead
	// of reaching the sandbox, and every key would echo twice.
	if raw.Lflag&(unix.ISIG|unix.ICANON|unix.ECHO) != 0 || raw.Iflag&unix.ICRNL != 0 || raw.Oflag&unix.OPOST != 0 {
		t.Errorf("not raw: lflag %#x iflag %#x oflag %#x", raw.Lflag, raw.Iflag, raw.Oflag)
	}
	restore()
	after, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Errorf("terminal not restored:\n got %+v\nwant %+v", after, before)
	}
}

func TestWindowSize(t *testing.T) {
	tty := openPTY(t)
	fd := int(tty.Fd())
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 121}); err != nil {
		t.Fatal(err)
	}
	ws, err := windowSize(fd)
	if err != nil || ws.Rows != 33 || ws.Cols != 121 {
		t.Errorf("windowSize = %+v, %v", ws, err)
	}
}

func TestPlainFileIsNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(int(f.Fd())) {
		t.Error("/dev/null is a terminal")
	}
}

// TestTTYSessionForwardsWindowAndSignals drives sandboxctl run --tty on a
// pseudo-terminal against a fake daemon that raises SIGWINCH and SIGINT in
// this very process, as a resizing, interrupting user would.
func TestTTYSessionForwardsWindowAndSignals(t *testing.T) {
	tty := openPTY(t)
	fd := int(tty.Fd())
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{killed: make(chan *sandboxdv1.KillRequest, 1)}
	d.session = func(s sessionStream) error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if w := req.GetStart().GetWindow(); !req.GetStart().GetTty() || w.GetRows() != 24 || w.GetCols() != 80 {
			return fmt.Errorf("start: tty %v window %v", req.GetStart().GetTty(), w)
		}
		if err := s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: "t1"}}}); err != nil {
			return err
		}
		if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 132}); err != nil {
			return err
		}
		if err := unix.Kill(os.Getpid(), unix.SIGWINCH); err != nil {
			return err
		}
		for {
			req, err := s.Recv()
			if err != nil {
				return err
			}
			if r := req.GetResize(); r != nil {
				if r.GetRows() != 50 || r.GetCols() != 132 {
					return fmt.Errorf("resize %v", r)
				}
				break
			}
		}
		if err := unix.Kill(os.Getpid(), unix.SIGINT); err != nil {
			return err
		}
		// Signals travel by the Kill RPC, beside the stream.
		k := <-d.killed
		if k.GetId() != "t1" {
			return fmt.Errorf("kill of %q, want t1", k.GetId())
		}
		return s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: &sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: k.GetSignal()}}})
	}
	sock := startDaemon(t, d)
	var stderr strings.Builder
	c := &cli{stdin: tty, stdout: io.Discard, stderr: &stderr}
	if code := c.main(context.Background(), []string{"--socket", sock, "run", "--tty", "--", "sh"}); code != 128+2 {
		t.Errorf("code %d, want 130; stderr %q", code, stderr.String())
	}
	after, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Error("terminal left in raw mode")
	}
}

// TestTTYAttachDetachKeys attaches to a PTY session from a pseudo-terminal
// and types ctrl-p and ctrl-q in separate reads: the terminal is raw while
// attached and restored after, and the session gets the input before the
// keys, its window size and no EOF.
func TestTTYAttachDetachKeys(t *testing.T) {
	master, tty := openPTYPair(t)
	fd := int(tty.Fd())
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{ttySession}}
	d.session = func(s sessionStream) error {
		att, err := recvAttach(s, "t1", false)
		if err != nil {
			return err
		}
		if w := att.GetWindow(); w.GetRows() != 24 || w.GetCols() != 80 {
			return fmt.Errorf("window %v", w)
		}
		if err := s.Send(startedMsg("t1")); err != nil {
			return err
		}
		raw, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
		if err != nil {
			return err
		}
		if raw.Lflag&(unix.ICANON|unix.ISIG|unix.ECHO) != 0 || raw.Iflag&unix.IXON != 0 {
			return fmt.Errorf("terminal not raw while attached: lflag %#x iflag %#x", raw.Lflag, raw.Iflag)
		}
		if _, err := master.Write([]byte("ls\r\x10")); err != nil {
			return err
		}
		// The ctrl-p is held back until what follows it is known.
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if got := string(req.GetStdin().GetData()); got != "ls\r" {
			return fmt.Errorf("stdin %q, want %q", got, "ls\r")
		}
		if _, err := master.Write([]byte("\x11")); err != nil {
			return err
		}
		req, err = s.Recv()
		if err == nil {
			return fmt.Errorf("sent %v after the detach keys", req)
		}
		return nil
	}
	sock := startDaemon(t, d)
	var stderr strings.Builder
	c := &cli{stdin: tty, stdout: io.Discard, stderr: &stderr}
	if code := c.main(context.Background(), []string{"--socket", sock, "attach", "t1"}); code != 0 {
		t.Errorf("code %d, want 0; stderr %q", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "detached from session t1") {
		t.Errorf("stderr %q", stderr.String())
	}
	after, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Error("terminal left in raw mode")
	}
}

// TestTopRedrawsATerminal: on a terminal top homes the cursor and clears
// the screen before each table (the plain form is tested elsewhere).
func TestTopRedrawsATerminal(t *testing.T) {
	master, replica := openPTYPair(t)
	sock := startDaemon(t, &fakeDaemon{})
	c := &cli{stdin: os.Stdin, stdout: replica, stderr: io.Discard}
	done := make(chan int, 1)
	go func() { done <- c.main(context.Background(), []string{"--socket", sock, "top", "-n", "1"}) }()
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "a1b2") {
		n, err := master.Read(buf)
		if err != nil {
			t.Fatalf("reading the terminal: %v; read %q", err, seen.String())
		}
		seen.Write(buf[:n])
	}
	if code := <-done; code != 0 {
		t.Errorf("code %d", code)
	}
	if !strings.HasPrefix(seen.String(), "\x1b[H\x1b[2Jsandboxd ") {
		t.Errorf("top on a terminal wrote %q, want it to home and clear first", seen.String())
	}
}
