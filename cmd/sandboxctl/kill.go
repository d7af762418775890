package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

func killVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl kill", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	sig := fs.String("signal", "0", "signal `N` or name (TERM, INT, ...) to send to the command; 0 kills the whole sandbox")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl kill [--signal N] ID\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	n, err := parseSignal(*sig)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl kill: --signal: %v\n", err)
		return exitUsage
	}
	cl, err := c.dial(ctx)
	if err != nil {
		printError(c.stderr, err)
		return exitFailed
	}
	defer cl.Close()
	if err := cl.Kill(ctx, fs.Arg(0), n); err != nil {
		printError(c.stderr, err)
		return exitFailed
	}
	return 0
}
