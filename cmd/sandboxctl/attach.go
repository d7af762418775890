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
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const attachUsage = `usage: sandboxctl attach [--read-only] [--no-stdin] ID

Attaches to session ID: prints the output the daemon kept of it, then its
live output, until the session ends or you leave it. When it ends, attach
exits as run does, with the session's exit status (N, 126, 127, 128+N); an
ended session's output is printed and attach exits at once.

By default attach is the session's one interactive client, and the daemon
refuses it while there is another (the client that started a session
without --detach, or another attach). It forwards stdin and SIGINT. For a
PTY session on a local terminal it puts the terminal in raw mode and
follows its size, as run --tty does, and the keys ctrl-p ctrl-q leave the
session running and exit 0 (a ctrl-p is held back until the next key shows
whether the two are meant). The end of stdin (ctrl-d on a terminal that is
not raw, or the end of a file or pipe) is forwarded as the end of the
session's input, as run does: a pipe session's stdin is closed.
--no-stdin forwards no input and leaves the session's stdin open.

--read-only only watches: nothing typed or signalled here reaches the
session, any number of clients may watch, and ctrl-c ends attach with
exit status 0.

SIGTERM and SIGHUP (a closed terminal) end attach with exit status 0 and
leave the session running; use 'sandboxctl kill' to end it.

Exits 1 when there is no session ID (as inspect and kill do), and 125 when
the daemon refused the attach, could not be reached, or went away.

flags:
`

// attachFlags are the flags of sandboxctl attach, as given.
type attachFlags struct {
	readOnly, noStdin bool
}

func attachVerb(ctx context.Context, c *cli, args []string) int {
	var f attachFlags
	fs := flag.NewFlagSet("sandboxctl attach", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.BoolVar(&f.readOnly, "read-only", false, "only watch: send no input, resizes or signals")
	fs.BoolVar(&f.noStdin, "no-stdin", false, "forward no input, not even its end, in an interactive attach")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), attachUsage)
		fs.PrintDefaults()
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	id := pos[0]
	cl, err := c.dial(ctx)
	if err != nil {
		printError(c.stderr, err)
		return client.ExitDaemonFailed
	}
	defer cl.Close()
	// Whether the session has a terminal decides the raw mode and the
	// detach keys, which must be set before its output arrives.
	info, err := cl.Inspect(ctx, id)
	if err != nil {
		// Inspect is this verb's means, not its name, in what it prints.
		return c.attachFailed(fmt.Errorf("attach %s: %s", id, status.Convert(err).Message()), status.Code(err))
	}

	// SIGTERM and SIGHUP say that this client is to go, not the session,
	// which may have been detached precisely to outlive it.
	leave := []os.Signal{syscall.SIGTERM, syscall.SIGHUP}
	if f.readOnly {
		leave = append(leave, syscall.SIGINT)
	}
	lctx, stop := signal.NotifyContext(ctx, leave...)
	defer stop()
	res, err := c.attach(lctx, cl, info, f)
	switch {
	case err != nil && lctx.Err() != nil && ctx.Err() == nil:
		return 0
	case err != nil:
		return c.attachFailed(err, status.Code(err))
	case res.Detached:
		fmt.Fprintf(c.stderr, "\nsandboxctl: detached from session %s, which runs on\n", res.SessionID)
		return 0
	}
	return c.finish(res, err)
}

// attachFailed prints why attaching failed. A missing session exits 1, as
// for inspect and kill; anything else is the daemon's refusal or failure.
func (c *cli) attachFailed(err error, code codes.Code) int {
	if code == codes.NotFound {
		fmt.Fprintf(c.stderr, "sandboxctl: %v\n", err)
		return exitFailed
	}
	printError(c.stderr, err)
	return client.ExitDaemonFailed
}

// attach joins the session info describes with the local stdio. The
// terminal is restored before it returns, so what follows prints on a sane
// tty.
func (c *cli) attach(ctx context.Context, cl *client.Client, info *sandboxdv1.SessionInfo, f attachFlags) (*client.Result, error) {
	// attach prints no enforcement report (inspect does), so Started comes
	// without one, as for run.
	opts := client.AttachOptions{ID: info.GetId(), ReadOnly: f.readOnly, Stdout: c.stdout, Stderr: c.stderr, OmitEnforcement: true}
	if f.readOnly {
		return cl.Attach(ctx, opts)
	}
	signals := make(chan int32, 4)
	stopSignals := forwardSignals(signals, syscall.SIGINT)
	defer stopSignals()
	opts.Signals = signals
	if !f.noStdin {
		opts.Stdin = c.stdin
	}
	if info.GetTty() {
		window, resize, restore, err := c.wireTerminal(!f.noStdin, true)
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", info.GetId(), err)
		}
		defer restore()
		opts.Window, opts.Resize = window, resize
		if opts.Stdin != nil {
			opts.Stdin = newDetachReader(opts.Stdin)
		}
	}
	return cl.Attach(ctx, opts)
}
