//go:build !windows

package testsock

import (
	"net"
	"path/filepath"
	"testing"
)

// Listen listens on a new unix socket in a directory of the test's own and
// returns it with the address to dial. The test closes it.
func Listen(t testing.TB) (net.Listener, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return ln, sock
}

// Missing is an address where nothing listens.
func Missing(t testing.TB) string {
	return filepath.Join(t.TempDir(), "missing.sock")
}
