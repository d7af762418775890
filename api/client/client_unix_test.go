//go:build !windows

package client

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// staleSockets are sockets left by a daemon that died: the file is there,
// nobody accepts on it.
func staleSockets(t *testing.T) map[string]string {
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	return map[string]string{"stale": stale}
}

// TestCallAfterDaemonRestartRedials: a client whose daemon went away and
// came back on the same socket connects afresh for its next call, and a
// call while nothing listens fails as a broken connection.
func TestCallAfterDaemonRestartRedials(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	serveOn := func() *grpc.Server {
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		sandboxdv1grpc.RegisterSandboxdServer(gs, &scriptedServer{})
		go gs.Serve(ln)
		return gs
	}
	gs := serveOn()
	c := dial(t, sock)
	ctx := context.Background()
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	gs.Stop()
	if _, err := c.List(ctx); status.Code(err) != codes.Unavailable {
		t.Errorf("List with no daemon = %v, want Unavailable", err)
	}
	gs = serveOn()
	defer gs.Stop()
	if _, err := c.List(ctx); err != nil {
		t.Errorf("List after the daemon came back: %v", err)
	}
}
