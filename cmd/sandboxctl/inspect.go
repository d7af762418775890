package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func inspectVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl inspect", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	// Accepted so that every verb that lists or shows sessions takes
	// --json; inspect has only the one form.
	fs.Bool("json", true, "print JSON (the only form)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl inspect [--json] ID\n\nPrints the session as JSON: state, argv, policy, enforcement, exit code.\n\nflags:\n")
		fs.PrintDefaults()
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	var info *sandboxdv1.SessionInfo
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		info, err = cl.Inspect(ctx, pos[0])
		return err
	}); code != 0 {
		return code
	}
	out, err := inspectJSON(info)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl: encoding session %s: %v\n", pos[0], err)
		return exitFailed
	}
	fmt.Fprintf(c.stdout, "%s\n", out)
	return 0
}

// inspectJSON is the session as indented JSON with proto field names and
// unpopulated fields, so that "exit_code": 0 is there for scripts to read
// rather than absent, and with the state named as ps and events spell it
// ("waiting-for-input") rather than as the enum constant.
func inspectJSON(info *sandboxdv1.SessionInfo) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(info)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	if fields["state"], err = json.Marshal(client.StateName(info.GetState())); err != nil {
		return nil, err
	}
	return json.MarshalIndent(fields, "", "  ")
}
