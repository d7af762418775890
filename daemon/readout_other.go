//go:build !linux

package daemon

import "os"

// outputReader returns how a session's output is read from f: a plain
// Read, since outside Linux a terminal master may be blocking and a second
// read to coalesce would wait for more output.
func outputReader(f *os.File) func() ([]byte, error) {
	return plainOutputReader(f)
}
