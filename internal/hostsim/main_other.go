//go:build !linux

package hostsim

import (
	"fmt"
	"io"
)

// Main is the hostsim command. Seccomp exists only on Linux, so elsewhere it
// only reports that.
func Main(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "hostsim: seccomp filters exist only on Linux")
	return 2
}
