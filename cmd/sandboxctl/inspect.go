package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
)

func inspectVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl inspect", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl inspect ID\n\nPrints the session as JSON: state, argv, policy, enforcement, exit code.\n")
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
	cl, err := c.dial(ctx)
	if err != nil {
		printError(c.stderr, err)
		return exitFailed
	}
	defer cl.Close()
	info, err := cl.Inspect(ctx, fs.Arg(0))
	if err != nil {
		printError(c.stderr, err)
		return exitFailed
	}
	// Proto field names and unpopulated fields, so that "exit_code": 0 is
	// there for scripts to read rather than absent.
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}.Marshal(info)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl: encoding session %s: %v\n", fs.Arg(0), err)
		return exitFailed
	}
	fmt.Fprintf(c.stdout, "%s\n", out)
	return 0
}
