//go:build !unix

package daemon

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

// Listen fails: this OS serves on a named pipe, which is not implemented yet.
func Listen(path string) (net.Listener, error) {
	return nil, fmt.Errorf("listen %s on %s: %w", path, runtime.GOOS, errors.ErrUnsupported)
}
