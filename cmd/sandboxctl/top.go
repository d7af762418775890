package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const topUsage = `usage: sandboxctl top [--interval D] [--tree] [-n N]

Shows the ps table full screen and redraws it whenever a session changes
state or is denied something (sandboxctl events), and at least every
interval for the ages. Interrupt to stop.

flags:
`

// topSettle lets a burst of events (a session starting, its first
// denials) land in one redraw.
const topSettle = 100 * time.Millisecond

func topVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl top", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	interval := fs.Duration("interval", time.Second, "redraw at least this often")
	tree := fs.Bool("tree", false, "show child sessions under their parents")
	count := fs.Int("n", 0, "stop after `N` redraws (0: until interrupted)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), topUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseVerb(fs, args, 0); !ok {
		return code
	}
	if *interval <= 0 {
		fmt.Fprintln(c.stderr, "sandboxctl top: --interval must be positive")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.withClient(ctx, func(cl *client.Client) error {
		changed := make(chan struct{}, 1)
		watchErr := make(chan error, 1)
		go func() {
			watchErr <- cl.Watch(ctx, &sandboxdv1.WatchRequest{}, func(*sandboxdv1.Event) error {
				select {
				case changed <- struct{}{}:
				default:
				}
				return nil
			})
		}()
		tick := time.NewTicker(*interval)
		defer tick.Stop()
		for n := 1; ; n++ {
			sessions, err := cl.List(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			now := time.Now()
			// Home and clear, as top does; the table is redrawn whole.
			fmt.Fprint(c.stdout, "\x1b[H\x1b[2J")
			fmt.Fprintf(c.stdout, "sandboxd %s  %s\n\n", now.Format("15:04:05"), summary(sessions))
			if err := writePS(c.stdout, sessions, *tree, now); err != nil {
				return err
			}
			if *count > 0 && n >= *count {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-watchErr:
				if ctx.Err() != nil {
					return nil
				}
				return err
			case <-tick.C:
			case <-changed:
				time.Sleep(topSettle)
			}
		}
	})
}

// summary counts sessions by state, live ones first.
func summary(sessions []*sandboxdv1.SessionInfo) string {
	counts := map[sandboxdv1.State]int{}
	for _, s := range sessions {
		counts[s.GetState()]++
	}
	out := fmt.Sprintf("%d sessions", len(sessions))
	for _, st := range []sandboxdv1.State{sandboxdv1.State_STARTING, sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT,
		sandboxdv1.State_EXITED, sandboxdv1.State_FAILED_TO_START, sandboxdv1.State_KILLED} {
		if counts[st] > 0 {
			out += fmt.Sprintf(", %d %s", counts[st], client.StateName(st))
		}
	}
	return out
}
