//go:build !linux && !darwin && !windows

package transport

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

// peerCaller refuses every connection: without the kernel's word on who
// connected, the daemon cannot pick the sandbox's identity.
func peerCaller(net.Conn) (Caller, error) {
	return Caller{}, fmt.Errorf("reading peer credentials on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
