//go:build !linux && !darwin && !windows

package daemon

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/sandboxd/sandboxd/launcher"
)

// CheckMechanismSet accepts only the automatic choice: there is no
// backend with mechanism sets to choose from on this OS yet.
func CheckMechanismSet(name string) error {
	if name != "" {
		return fmt.Errorf("no mechanism set %q on %s", name, runtime.GOOS)
	}
	return nil
}

// DefaultBackend fails: there is no sandbox backend for this OS yet, and the
// daemon never runs commands unconfined.
func DefaultBackend(BackendOptions) (launcher.Backend, error) {
	return nil, fmt.Errorf("no sandbox backend for %s yet: %w", runtime.GOOS, errors.ErrUnsupported)
}
