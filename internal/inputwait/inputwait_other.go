//go:build !linux || !amd64

package inputwait

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"syscall"
)

// Probe tells what one session's processes wait on. Nothing can
// construct one on this platform.
type Probe struct{}

// ForTerminal is not implemented on this platform.
func ForTerminal(root int, master *os.File) (*Probe, error) {
	return nil, unsupported()
}

// ForPipe is not implemented on this platform.
func ForPipe(root int, stdin syscall.Conn) (*Probe, error) {
	return nil, unsupported()
}

// Check is not implemented on this platform.
func (p *Probe) Check() (State, error) {
	return Running, unsupported()
}

// Explain is not implemented on this platform.
func (p *Probe) Explain() (State, []Task, error) {
	return Running, nil, unsupported()
}

// Waiting is not implemented on this platform.
func (p *Probe) Waiting() (bool, error) {
	return false, unsupported()
}

// ExcludeRoot does nothing: nothing can construct a Probe here.
func (p *Probe) ExcludeRoot() {}

// PrivateLoopback does nothing: nothing can construct a Probe here.
func (p *Probe) PrivateLoopback([]netip.AddrPort) {}

// Close does nothing: there is nothing to release.
func (p *Probe) Close() error {
	return nil
}

func unsupported() error {
	return fmt.Errorf("input-wait detection on %s/%s: %w", runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)
}
