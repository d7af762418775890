//go:build darwin || windows

package daemon

import (
	"fmt"
	"runtime"
)

// onlyMechanismSet rejects a forced mechanism set other than only, the
// one set of a backend that has no choice to make.
func onlyMechanismSet(name, only string) error {
	if name != "" && name != only {
		return fmt.Errorf("no mechanism set %q on %s, only %q", name, runtime.GOOS, only)
	}
	return nil
}
