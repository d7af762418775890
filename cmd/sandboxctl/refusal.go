package main

import (
	"fmt"
	"io"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// printRefusal writes why the daemon cannot enforce a policy, one fact per
// line, so an operator sees what to fix rather than a one-line error.
func printRefusal(w io.Writer, u *sandboxdv1.Unenforceable) {
	fmt.Fprintf(w, "sandboxctl: refused: cannot enforce %s\n", u.GetField())
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "  %s: %s\n", label, value)
		}
	}
	line("needs", u.GetMechanism())
	line("found", u.GetFound())
	switch {
	case u.GetProbe() != "" && u.GetErrno() != "":
		line("probe", u.GetProbe()+": "+u.GetErrno())
	case u.GetProbe() != "":
		line("probe", u.GetProbe())
	default:
		line("errno", u.GetErrno())
	}
	line("remedy", u.GetRemedy())
}
