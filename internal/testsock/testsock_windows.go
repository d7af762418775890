package testsock

import (
	"crypto/rand"
	"net"
	"testing"

	"github.com/Microsoft/go-winio"
)

// Listen listens on a new named pipe and returns it with the address to
// dial. The test closes it.
func Listen(t testing.TB) (net.Listener, string) {
	t.Helper()
	name := Missing(t)
	ln, err := winio.ListenPipe(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ln, name
}

// Missing is an address where nothing listens: a pipe name no one has
// taken, random so that tests running at once do not meet.
func Missing(testing.TB) string {
	return `\\.\pipe\sandboxd-test-` + rand.Text()
}
