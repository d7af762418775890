package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const commitUsage = `usage: sandboxctl commit [--force] ID

Applies what the ended session ID changed in its --layer paths to those
paths, one file at a time, each written beside its place and renamed over
it, and drops the layers. New files get the path's owner; changed files keep
theirs. If a file the layers change also changed on the host since the
session started, nothing is applied and the files are listed; --force
applies the layers over them.

flags:
`

func commitVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl commit", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	force := fs.Bool("force", false, "apply even files that changed on the host since the layer was made")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), commitUsage)
		fs.PrintDefaults()
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	var diffs []*sandboxdv1.LayerDiff
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		diffs, err = cl.Commit(ctx, pos[0], *force)
		return err
	}); code != 0 {
		return code
	}
	for _, d := range diffs {
		fmt.Fprintf(c.stdout, "%s: %d changes committed\n", d.GetLayer().GetPath(), len(d.GetChanges()))
	}
	return 0
}
