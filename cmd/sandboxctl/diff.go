package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const diffUsage = `usage: sandboxctl diff [--patch | --json] ID

Shows what session ID changed in the paths it ran with --layer: each path
added, modified (content, type or link target), deleted, or with only its
mode changed. A rename shows as a deletion and an addition. --patch prints a
unified diff of the text files instead (apply it with patch -p1 in the
path); --json prints the layers and their changes as a JSON array.

flags:
`

func diffVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl diff", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	patch := fs.Bool("patch", false, "print a unified diff of the text files")
	asJSON := fs.Bool("json", false, "print the layers and their changes as a JSON array")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), diffUsage)
		fs.PrintDefaults()
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	if *patch && *asJSON {
		c.usageError(fs.Name(), "--patch and --json: choose one")
		return exitUsage
	}
	var diffs []*sandboxdv1.LayerDiff
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		diffs, err = cl.Diff(ctx, pos[0], *patch)
		return err
	}); code != 0 {
		return code
	}
	switch {
	case *asJSON:
		out, err := layerDiffsJSON(diffs)
		if err != nil {
			fmt.Fprintf(c.stderr, "sandboxctl: encoding the diff: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(c.stdout, "%s\n", out)
	case *patch:
		for _, d := range diffs {
			fmt.Fprint(c.stdout, d.GetPatch())
		}
	default:
		writeChanges(c.stdout, diffs)
	}
	return 0
}

// writeChanges lists each layer's changes under its path.
func writeChanges(w io.Writer, diffs []*sandboxdv1.LayerDiff) {
	for _, d := range diffs {
		fmt.Fprintf(w, "%s (%d changes)\n", d.GetLayer().GetPath(), len(d.GetChanges()))
		for _, ch := range d.GetChanges() {
			line := fmt.Sprintf("  %-9s %s", changeWord(ch.GetKind()), ch.GetPath())
			if ch.GetType() == "dir" {
				line += "/"
			}
			if ch.GetKind() == sandboxdv1.Change_MODE {
				line += fmt.Sprintf(" (%v -> %v)", fs.FileMode(ch.GetOldMode()), fs.FileMode(ch.GetNewMode()))
			}
			fmt.Fprintln(w, line)
		}
	}
}

func changeWord(k sandboxdv1.Change_Kind) string {
	switch k {
	case sandboxdv1.Change_ADDED:
		return "added"
	case sandboxdv1.Change_MODIFIED:
		return "modified"
	case sandboxdv1.Change_DELETED:
		return "deleted"
	case sandboxdv1.Change_MODE:
		return "mode"
	}
	return k.String()
}

func layerDiffsJSON(diffs []*sandboxdv1.LayerDiff) ([]byte, error) {
	list := make([]json.RawMessage, 0, len(diffs))
	for _, d := range diffs {
		b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(d)
		if err != nil {
			return nil, err
		}
		list = append(list, b)
	}
	return json.MarshalIndent(list, "", "  ")
}
