package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxd/sandboxd/api/client"
)

const logsUsage = `usage: sandboxctl logs ID

Prints the output the daemon kept of session ID (its last 64 KiB by
default, sandboxd --scrollback), stdout to stdout and stderr to stderr; a
PTY session's is all on stdout. Ended sessions keep theirs while they are
listed by ps -a; a session still running runs on (attach --read-only
follows its live output). Exits 0, whatever the session's own exit code
(see inspect), and 1 when there is no session ID or the daemon failed.
`

func logsVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl logs", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), logsUsage) }
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	id := pos[0]
	// Stopping logs leaves the session as it is: a read-only attach
	// sends it nothing.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return c.withClient(ctx, func(cl *client.Client) error {
		// Only the output is printed: Started need not carry the report.
		_, err := cl.Attach(ctx, client.AttachOptions{ID: id, ReplayOnly: true, Stdout: c.stdout, Stderr: c.stderr, OmitEnforcement: true})
		switch {
		case err == nil, ctx.Err() != nil:
			return nil
		case status.Code(err) == codes.NotFound:
			// Attach is this verb's means, not its name, in what it says.
			return fmt.Errorf("logs %s: %s", id, status.Convert(err).Message())
		}
		return err
	})
}
