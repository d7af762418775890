//go:build !linux

package fdwait

import (
	"errors"
	"syscall"
)

// ErrUnsupported: this OS has no waiter.
var ErrUnsupported = errors.New("fdwait: not supported on this OS")

// Wait is one descriptor's registration.
type Wait struct{}

// Ready returns ErrUnsupported.
func Ready() error { return ErrUnsupported }

// Add returns ErrUnsupported.
func Add(f syscall.Conn, fn func()) (*Wait, error) { return nil, ErrUnsupported }

// AddOnce returns ErrUnsupported.
func AddOnce(f syscall.Conn, fn func()) (*Wait, error) { return nil, ErrUnsupported }

// Rearm does nothing.
func (w *Wait) Rearm() error { return ErrUnsupported }

// Cancel does nothing.
func (w *Wait) Cancel() {}

// closeFd is never called here: every Lazy is Opened.
func closeFd(fd int) error { return ErrUnsupported }
