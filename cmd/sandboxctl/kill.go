package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/sandboxd/sandboxd/api/client"
)

func killVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl kill", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	sig := fs.String("signal", "0", "signal `N` or name (TERM, INT, ...) to send to the command; 0 kills the whole sandbox")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl kill [--signal N] ID\n\nflags:\n")
		fs.PrintDefaults()
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	n, err := parseSignal(*sig)
	if err != nil {
		c.usageError(fs.Name(), fmt.Sprintf("--signal %s: %v", *sig, err))
		return exitUsage
	}
	return c.withClient(ctx, func(cl *client.Client) error {
		return cl.Kill(ctx, pos[0], n)
	})
}
