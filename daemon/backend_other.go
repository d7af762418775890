//go:build !linux && !darwin && !windows

package daemon

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/sandboxd/sandboxd/launcher"
)

// DefaultBackend fails: there is no sandbox backend for this OS yet, and the
// daemon never runs commands unconfined.
func DefaultBackend(BackendOptions) (launcher.Backend, error) {
	return nil, fmt.Errorf("no sandbox backend for %s yet: %w", runtime.GOOS, errors.ErrUnsupported)
}
