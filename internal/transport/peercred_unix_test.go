//go:build linux || darwin

package transport

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestPeerCaller(t *testing.T) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	for _, session := range []string{"", "s1"} {
		t.Run("session="+session, func(t *testing.T) {
			var l net.Listener = lis
			if session != "" {
				l = scopedListener{Listener: lis, session: session}
			}
			client, err := net.Dial("unix", lis.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			conn, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			c, err := peerCaller(conn)
			if err != nil {
				t.Fatal(err)
			}
			// The peer is this process, so the kernel's record must be
			// this process's effective identity.
			if int(c.UID) != os.Geteuid() || int(c.GID) != os.Getegid() || int(c.PID) != os.Getpid() || c.Session != session {
				t.Errorf("peerCaller = uid %d gid %d pid %d session %q, want %d %d %d %q", c.UID, c.GID, c.PID, c.Session, os.Geteuid(), os.Getegid(), os.Getpid(), session)
			}
		})
	}
}

func TestPeerCallerRefusesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := peerCaller(a); err == nil {
		t.Fatal("peerCaller accepted a connection that is not a unix socket")
	}
}
