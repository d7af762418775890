package main

import (
	"context"
	"flag"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func inspectVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl inspect", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl inspect ID\n\nPrints the session as JSON: state, argv, policy, enforcement, exit code.\n")
	}
	if code, ok := parseVerb(fs, args, 1); !ok {
		return code
	}
	var info *sandboxdv1.SessionInfo
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		info, err = cl.Inspect(ctx, fs.Arg(0))
		return err
	}); code != 0 {
		return code
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
