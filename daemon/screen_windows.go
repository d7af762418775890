package daemon

import (
	"errors"
	"syscall"
)

// writeNoWait does not answer on Windows: ConPTY stands between the program
// and the daemon and answers its terminal's queries itself.
func writeNoWait(syscall.Conn, []byte) error {
	return errors.ErrUnsupported
}
