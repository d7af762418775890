//go:build !windows

package main

// commands are the subcommands, by name: none here, where the daemon is
// installed with the init system's own files (deploy/).
var commands map[string]command

// runService says that no service manager needs talking to: the init
// systems here start the daemon as a plain process.
func runService([]string) (code int, ok bool) { return 0, false }
