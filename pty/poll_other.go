//go:build unix && !linux

package pty

import "os"

// pollable keeps the master blocking: kqueue does not reliably report
// readiness on terminal devices on every BSD-derived kernel.
func pollable(m *os.File) (*os.File, error) {
	return m, nil
}
