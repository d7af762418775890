package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/sandboxd/sandboxd/api/client"
)

func discardVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl discard", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl discard ID\n\nDrops what the ended session ID changed in its --layer paths; the paths stay as they are.\n")
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	return c.withClient(ctx, func(cl *client.Client) error {
		return cl.Discard(ctx, pos[0])
	})
}
