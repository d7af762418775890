package transport

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	"github.com/sandboxd/sandboxd/internal/testsock"
)

// acceptOne accepts one connection on l while dial connects to it.
func acceptOne(t *testing.T, l net.Listener, dial func() (net.Conn, error)) net.Conn {
	t.Helper()
	type accepted struct {
		conn net.Conn
		err  error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	client, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { a.conn.Close() })
	return a.conn
}

func dialAt(name string, level winio.PipeImpLevel) func() (net.Conn, error) {
	return func() (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return winio.DialPipeAccessImpLevel(ctx, name, windows.GENERIC_READ|windows.GENERIC_WRITE, level)
	}
}

func TestPeerCaller(t *testing.T) {
	lis, name := testsock.Listen(t)
	defer lis.Close()
	self, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	for _, session := range []string{"", "s1"} {
		t.Run("session="+session, func(t *testing.T) {
			var l net.Listener = lis
			if session != "" {
				l = scopedListener{Listener: lis, session: session}
			}
			conn := acceptOne(t, l, dialAt(name, winio.PipeImpLevelIdentification))
			c, err := peerCaller(conn)
			if err != nil {
				t.Fatal(err)
			}
			// The peer is this process, whose own account counts as an
			// administrator of the daemon.
			if c.SID != self.User.Sid.String() || int(c.PID) != os.Getpid() || !c.Admin || c.Session != session || c.UID != 0 {
				t.Errorf("peerCaller = %+v, want SID %s pid %d admin, session %q", c, self.User.Sid, os.Getpid(), session)
			}
		})
	}
}

func TestPeerCallerRefusesAnonymousClients(t *testing.T) {
	lis, name := testsock.Listen(t)
	defer lis.Close()
	conn := acceptOne(t, lis, dialAt(name, winio.PipeImpLevelAnonymous))
	if c, err := peerCaller(conn); err == nil {
		t.Fatalf("peerCaller = %+v for a client that withheld its identity", c)
	}
}

func TestPeerCallerRefusesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := peerCaller(a); err == nil {
		t.Fatal("peerCaller accepted a connection that is not a named pipe")
	}
}
