//go:build !unix && !windows

package transport

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

// Listen fails: this OS has neither unix sockets nor named pipes to serve on.
func Listen(path string) (net.Listener, error) {
	return nil, fmt.Errorf("listen %s on %s: %w", path, runtime.GOOS, errors.ErrUnsupported)
}
