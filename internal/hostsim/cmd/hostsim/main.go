// Command hostsim runs a command on a simulated degraded host; see package
// github.com/sandboxd/sandboxd/internal/hostsim.
package main

import (
	"os"

	"github.com/sandboxd/sandboxd/internal/hostsim"
)

func main() {
	os.Exit(hostsim.Main(os.Args[1:], os.Stderr))
}
