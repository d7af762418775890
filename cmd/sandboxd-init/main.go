//go:build linux

// Command sandboxd-init is the process sandboxd starts in each new sandbox:
// it builds the sandbox's root, restricts itself, starts the command and
// reaps until it exits. It is a binary of its own, beside sandboxd, because
// a Go program starts in time proportional to its size, and the daemon's
// gRPC and protobuf code would make every launch pay for it (see package
// sandboxinit). It does nothing when run any other way.
package main

import (
	"fmt"
	"os"

	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
)

func main() {
	// sandboxinit took over before main if this process is a sandbox init.
	fmt.Fprintf(os.Stderr, "%s is started by sandboxd as the init of each sandbox (argv[0] %q); it is not run by hand\n", os.Args[0], sandboxinit.Arg0)
	os.Exit(2)
}
