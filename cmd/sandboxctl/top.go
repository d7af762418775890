package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const topUsage = `usage: sandboxctl top [-a] [--interval D] [--tree] [-n N]

Shows the ps table full screen and redraws it whenever a session changes
state or is denied something (sandboxctl events), and at least every
interval for the ages. Interrupt to stop. When stdout is not a terminal
(a pipe, a file), each table is printed after the last, a blank line
between them, with no screen control codes.

flags:
`

// topSettle lets a burst of events (a session starting, its first
// denials) land in one redraw.
const topSettle = 100 * time.Millisecond

func topVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl top", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	interval := time.Second
	fs.Var(durationFlag{&interval}, "interval", "redraw at least this often")
	all := fs.Bool("a", false, "list ended sessions too, as ps -a")
	tree := fs.Bool("tree", false, "show child sessions under their parents")
	count := fs.Int("n", 0, "stop after `N` redraws (0: until interrupted)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), topUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := c.parseVerb(fs, args, 0); !ok {
		return code
	}
	if interval <= 0 {
		c.usageError(fs.Name(), fmt.Sprintf("--interval %v: must be above 0", interval))
		return exitUsage
	}
	screen := isTerminalWriter(c.stdout)
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
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 1; ; n++ {
			sessions, err := cl.List(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if !*all {
				sessions = live(sessions)
			}
			now := time.Now()
			switch {
			case screen:
				// Home and clear, as top does; the table is redrawn whole.
				fmt.Fprint(c.stdout, "\x1b[H\x1b[2J")
			case n > 1:
				fmt.Fprintln(c.stdout)
			}
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

// isTerminalWriter says whether w is a terminal, which top may redraw.
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(int(f.Fd()))
}

// summary counts sessions by state, live ones first.
func summary(sessions []*sandboxdv1.SessionInfo) string {
	counts := map[sandboxdv1.State]int{}
	for _, s := range sessions {
		counts[s.GetState()]++
	}
	out := fmt.Sprintf("%d sessions", len(sessions))
	for _, st := range []sandboxdv1.State{sandboxdv1.State_STARTING, sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT,
		sandboxdv1.State_WAITING, sandboxdv1.State_WAITING_FOR_NETWORK, sandboxdv1.State_EXITED, sandboxdv1.State_FAILED_TO_START, sandboxdv1.State_KILLED} {
		if counts[st] > 0 {
			out += fmt.Sprintf(", %d %s", counts[st], client.StateName(st))
		}
	}
	return out
}
