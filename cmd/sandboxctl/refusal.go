package main

import (
	"fmt"
	"io"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/doctor"
)

// printRefusal writes why the daemon cannot enforce a policy, one fact per
// line, so an operator sees what to fix rather than a one-line error.
func printRefusal(w io.Writer, u *sandboxdv1.Unenforceable) {
	fmt.Fprintf(w, "sandboxctl: refused: cannot enforce %s\n", u.GetField())
	doctor.WriteRefusal(w, "  ", u)
}
