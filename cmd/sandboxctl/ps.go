package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func psVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl ps", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	quiet := fs.Bool("q", false, "print session ids only")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl ps [-q]\n\nLists sessions: ID STATE PID AGE COMMAND.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseVerb(fs, args, 0); !ok {
		return code
	}
	var sessions []*sandboxdv1.SessionInfo
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		sessions, err = cl.List(ctx)
		return err
	}); code != 0 {
		return code
	}
	if *quiet {
		for _, s := range sessions {
			fmt.Fprintln(c.stdout, s.GetId())
		}
		return 0
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPID\tAGE\tCOMMAND")
	now := time.Now()
	for _, s := range sessions {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.GetId(), stateName(s.GetState()), s.GetPid(), age(s, now), command(s.GetArgv()))
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl: %v\n", err)
		return exitFailed
	}
	return 0
}

// stateName is the state as DESIGN.md spells it: "waiting-for-input".
func stateName(s sandboxdv1.State) string {
	return strings.ReplaceAll(strings.ToLower(s.String()), "_", "-")
}

func age(s *sandboxdv1.SessionInfo, now time.Time) string {
	if s.GetCreated() == nil {
		return "-"
	}
	d := now.Sub(s.GetCreated().AsTime())
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// command shortens argv to one table cell.
func command(argv []string) string {
	const max = 60
	s := strings.Join(argv, " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-3]) + "..."
	}
	return s
}
