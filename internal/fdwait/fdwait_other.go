//go:build !linux

package fdwait

import "errors"

// ErrUnsupported: this OS has no waiter.
var ErrUnsupported = errors.New("fdwait: not supported on this OS")

// Wait is one descriptor's registration.
type Wait struct{}

// Add returns ErrUnsupported.
func Add(fd int, fn func()) (*Wait, error) { return nil, ErrUnsupported }

// AddOnce returns ErrUnsupported.
func AddOnce(fd int, fn func()) (*Wait, error) { return nil, ErrUnsupported }

// Rearm does nothing.
func (w *Wait) Rearm() error { return ErrUnsupported }

// Cancel does nothing.
func (w *Wait) Cancel() {}
