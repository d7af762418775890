package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func layersVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl layers", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	quiet := fs.Bool("q", false, "print the sessions' ids only")
	asJSON := fs.Bool("json", false, "print the layers as a JSON array")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl layers [-q | --json]\n\nLists the layers of --layer sessions not yet committed or discarded:\nSESSION PATH SIZE AGE STATE PARENT (the session it was started on).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if _, code, ok := c.parseVerb(fs, args, 0); !ok {
		return code
	}
	if *quiet && *asJSON {
		c.usageError(fs.Name(), "-q and --json: choose one")
		return exitUsage
	}
	var list []*sandboxdv1.Layer
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		list, err = cl.Layers(ctx)
		return err
	}); code != 0 {
		return code
	}
	switch {
	case *asJSON:
		out := make([]json.RawMessage, 0, len(list))
		for _, l := range list {
			b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(l)
			if err != nil {
				fmt.Fprintf(c.stderr, "sandboxctl: encoding layers: %v\n", err)
				return exitFailed
			}
			out = append(out, b)
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintf(c.stdout, "%s\n", b)
	case *quiet:
		seen := map[string]bool{}
		for _, l := range list {
			if !seen[l.GetSessionId()] {
				seen[l.GetSessionId()] = true
				fmt.Fprintln(c.stdout, l.GetSessionId())
			}
		}
	default:
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tPATH\tSIZE\tAGE\tSTATE\tPARENT")
		now := time.Now()
		for _, l := range list {
			state, parent := "ended", l.GetParentSessionId()
			if l.GetActive() {
				state = "running"
			}
			if parent == "" {
				parent = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.GetSessionId(), l.GetPath(), sizeText(l.GetSizeBytes()), age(&sandboxdv1.SessionInfo{Created: l.GetCreated()}, now), state, parent)
		}
		tw.Flush()
	}
	return 0
}

// sizeText is n bytes in the 1024-based units the size flags take.
func sizeText(n uint64) string {
	units := []string{"B", "K", "M", "G", "T"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
