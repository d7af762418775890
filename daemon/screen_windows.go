package daemon

import (
	"errors"
	"os"
)

// writeNoWait does not answer on Windows: ConPTY stands between the program
// and the daemon and answers its terminal's queries itself.
func writeNoWait(*os.File, []byte) error {
	return errors.ErrUnsupported
}
