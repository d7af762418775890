package main

import (
	"context"
	"flag"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/doctor"
)

const doctorUsage = `usage: sandboxctl doctor [--json]

Shows what the daemon's host can enforce: host facts, the backend's probes,
its mechanism sets, per policy feature whether it is enforceable and by
what (or why not, and what would fix it), and the daemon's self-test, which
ran a probe in a real sandbox. Exits 0 when the self-test passed, 1 when it
failed or has not finished.

flags:
`

func doctorVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl doctor", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print the CapabilitiesReport as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), doctorUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := c.parseVerb(fs, args, 0); !ok {
		return code
	}
	var r *sandboxdv1.CapabilitiesReport
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		r, err = cl.Capabilities(ctx)
		return err
	}); code != 0 {
		return code
	}
	if *asJSON {
		// As inspect: proto field names, and false and zero values present
		// so that "ok": false is there for scripts to read.
		out, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}.Marshal(r)
		if err != nil {
			fmt.Fprintf(c.stderr, "sandboxctl: encoding capabilities: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(c.stdout, "%s\n", out)
	} else {
		doctor.Print(c.stdout, r)
	}
	if !r.GetSelfTest().GetPassed() {
		return exitFailed
	}
	return 0
}
