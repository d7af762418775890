package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/testsock"
)

// closingListener closes its first n connections as soon as it accepts
// them, without a word, as sandboxd does to a caller at its quota of
// connections, and hands the rest on.
type closingListener struct {
	net.Listener
	n      int32
	closed atomic.Int32
}

func (l *closingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.closed.Load() >= l.n {
			return c, err
		}
		l.closed.Add(1)
		c.Close()
	}
}

// TestConnectRunsAtOnce: a session on a client from Connect starts and
// ends as on one from Dial, its Start sent without waiting for the
// daemon's first frame.
func TestConnectRunsAtOnce(t *testing.T) {
	srv := &scriptedServer{session: func(s sessionStream) error {
		if _, err := recvStart(s); err != nil {
			return err
		}
		if err := s.Send(started("c1")); err != nil {
			return err
		}
		return s.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 3}))
	}}
	sock, _ := serve(t, srv)
	c, err := Connect(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Run(context.Background(), RunOptions{Start: runStart("true")})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "c1" || ExitCode(res, nil) != 3 {
		t.Errorf("session %q, exit code %d; want c1 and 3", res.SessionID, ExitCode(res, nil))
	}
}

// TestConnectSendsStartBeforeTheDaemonSpeaks: a listener that says nothing
// until it has read a request's HEADERS gets them, so the Start of a
// client from Connect does not wait for the daemon's SETTINGS (a round
// trip on every sandboxctl run).
func TestConnectSendsStartBeforeTheDaemonSpeaks(t *testing.T) {
	ln, sock := testsock.Listen(t)
	got := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer nc.Close()
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(nc)
		if _, err := io.ReadFull(r, make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))); err != nil {
			got <- fmt.Errorf("preface: %w", err)
			return
		}
		for {
			var h [9]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				got <- fmt.Errorf("no HEADERS before the listener spoke: %w", err)
				return
			}
			if h[3] == 0x1 {
				got <- nil
				return
			}
			n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
			if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
				got <- err
				return
			}
		}
	}()
	c, err := Connect(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go c.Run(ctx, RunOptions{Start: runStart("true")})
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestConnectRetriesConnectionsClosedUnanswered: a daemon at the caller's
// quota of connections closes them before reading anything, so Run
// connects again, as Dial does, and the session runs once it is let in.
func TestConnectRetriesConnectionsClosedUnanswered(t *testing.T) {
	var starts atomic.Int32
	srv := &scriptedServer{session: func(s sessionStream) error {
		if _, err := recvStart(s); err != nil {
			return err
		}
		starts.Add(1)
		if err := s.Send(started("c1")); err != nil {
			return err
		}
		return s.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED}))
	}}
	ln, sock := testsock.Listen(t)
	cl := &closingListener{Listener: ln, n: 3}
	gs := grpc.NewServer()
	sandboxdv1grpc.RegisterSandboxdServer(gs, srv)
	go gs.Serve(cl)
	t.Cleanup(gs.Stop)

	c, err := Connect(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(context.Background(), RunOptions{Start: runStart("true")}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := cl.closed.Load(); n != 3 {
		t.Errorf("%d connections closed unanswered, want 3", n)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the daemon read %d Starts, want 1", n)
	}
}

// TestConnectNotSandboxd: what Dial refuses fails the first session of a
// client from Connect with Dial's error.
func TestConnectNotSandboxd(t *testing.T) {
	junk, silent := notSandboxdListeners(t)
	for _, tc := range []struct{ name, sock, want string }{
		{"speaks something else", junk, "does not speak sandboxd"},
		{"never answers", silent, "did not answer as sandboxd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*HandshakeTimeout)
			defer cancel()
			c, err := Connect(ctx, tc.sock)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer c.Close()
			_, err = c.Run(ctx, RunOptions{Start: runStart("true")})
			if err == nil {
				t.Fatal("Run succeeded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.sock) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the socket and %q", err, tc.want)
			}
		})
	}
}

// TestConnectNoDaemon: a socket nobody listens on fails Connect itself, as
// Dial.
func TestConnectNoDaemon(t *testing.T) {
	sock := testsock.Missing(t)
	_, err := Connect(context.Background(), sock)
	if err == nil || !strings.Contains(err.Error(), "no sandboxd listening") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Connect: %v; want no sandboxd listening on %s", err, sock)
	}
}
