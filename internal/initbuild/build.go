// Package initbuild builds the C sandbox init and its plan decoder's test
// harness for tests, with the Makefile's rules, from the checkout the test
// was compiled from.
package initbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// root is the module's directory: two up from this file's.
func root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("initbuild: cannot tell where the source tree is")
	}
	return filepath.Join(filepath.Dir(file), "..", ".."), nil
}

func make1(target, variable, out string) error {
	dir, err := root()
	if err != nil {
		return err
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", dir, target, variable+"="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make %s: %v\n%s", target, err, b)
	}
	return nil
}

// Init builds bin/sandboxd-init's program into out.
func Init(out string) error { return make1("init-binary", "INIT_OUT", out) }

// Harness builds the plan decoder's test harness into out.
func Harness(out string) error { return make1("plan-harness", "HARNESS_OUT", out) }

var (
	sharedOnce sync.Once
	sharedDir  string
	sharedPath string
	sharedErr  error
)

// Shared builds the init once per test binary, in a directory of its own
// that every uid may search, as a sandbox uid must to run an installed
// init, and returns its path. The package's TestMain calls RemoveShared
// once its tests have run, so that the directory does not outlive the test
// binary; TestSharedIsRemoved holds every package that calls Shared to it.
func Shared() (string, error) {
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sandboxd-init-")
		if err != nil {
			sharedErr = err
			return
		}
		sharedDir = dir
		if err := os.Chmod(dir, 0o755); err != nil {
			sharedErr = err
			return
		}
		sharedPath = filepath.Join(dir, "sandboxd-init")
		sharedErr = Init(sharedPath)
	})
	return sharedPath, sharedErr
}

// RemoveShared removes what Shared built, if it built anything. Call it
// from TestMain after m.Run: no test may use the init after it.
func RemoveShared() {
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
}
