//go:build !unix && !windows

package pty

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// Open fails: this OS has no POSIX terminals; its backend wires a console of
// its own.
func Open() (master, replica *os.File, err error) {
	return nil, nil, fmt.Errorf("open pty on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Resize fails for the same reason as Open.
func Resize(master *os.File, rows, cols uint16) error {
	return fmt.Errorf("resize pty on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
