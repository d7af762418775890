//go:build !windows

package client

import (
	"net"
	"path/filepath"
	"testing"
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
