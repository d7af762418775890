// Command sandboxctl is the client and operator CLI of sandboxd: it runs
// commands in sandboxes through the daemon, attached or detached, attaches
// to sessions, lists, inspects and kills them, and reports what the
// daemon's host can enforce. One file per verb.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/sandboxd/sandboxd/api/client"
)

// Exit codes of sandboxctl itself. run and attach use client.ExitCode;
// their own failures, and those before a verb is known, are
// client.ExitDaemonFailed (125) so that they never look like the
// command's exit code. Only a missing session is exitFailed for attach
// too, as for the other verbs that take a session id.
const (
	exitFailed = 1
	exitUsage  = 2
)

// cli is what every verb gets: the global flags and the process's stdio.
type cli struct {
	socket string
	stdin  *os.File
	stdout io.Writer
	stderr io.Writer
}

type verb struct {
	summary string
	run     func(ctx context.Context, c *cli, args []string) int
}

var verbs = map[string]verb{
	"run":        {"run a command in a sandbox, or start it detached", runVerb},
	"attach":     {"watch a session's output, or take over its input", attachVerb},
	"ps":         {"list sessions", psVerb},
	"inspect":    {"show a session as JSON", inspectVerb},
	"kill":       {"signal or kill a session", killVerb},
	"doctor":     {"show what the host can enforce and the self-test", doctorVerb},
	"events":     {"follow session state changes and denials", eventsVerb},
	"top":        {"ps, refreshed as sessions change", topVerb},
	"export-oci": {"write the OCI runtime config that enforces a policy as sandboxd does", exportOCIVerb},
}

func main() {
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(c.main(context.Background(), os.Args[1:]))
}

func (c *cli) main(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("sandboxctl", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&c.socket, "socket", "", "daemon socket (default: $SANDBOXD_SOCKET, else the daemon's default socket)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl [--socket PATH] COMMAND [ARGS...]\n\ncommands:\n")
		names := make([]string, 0, len(verbs))
		for name := range verbs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(fs.Output(), "  %-8s %s\n", name, verbs[name].summary)
		}
		fmt.Fprintf(fs.Output(), "\nglobal flags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nRun 'sandboxctl COMMAND --help' for a command's flags.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return client.ExitDaemonFailed
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return client.ExitDaemonFailed
	}
	if fs.Arg(0) == "help" {
		fs.SetOutput(c.stdout)
		fs.Usage()
		return 0
	}
	v, ok := verbs[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(c.stderr, "sandboxctl: unknown command %q (see sandboxctl --help)\n", fs.Arg(0))
		return client.ExitDaemonFailed
	}
	return v.run(ctx, c, fs.Args()[1:])
}

func (c *cli) dial(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, c.socket)
}

// parseVerb parses an operator verb's flags and checks that it got nargs
// positional arguments. When ok is false the verb returns code.
func parseVerb(fs *flag.FlagSet, args []string, nargs int) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return exitUsage, false
	}
	if fs.NArg() != nargs {
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}

// withClient dials the daemon, runs f with the client and closes it.
func (c *cli) withClient(ctx context.Context, f func(*client.Client) error) int {
	cl, err := c.dial(ctx)
	if err != nil {
		printError(c.stderr, err)
		return exitFailed
	}
	defer cl.Close()
	if err := f(cl); err != nil {
		printError(c.stderr, err)
		return exitFailed
	}
	return 0
}

// printError writes err for a human: a refusal as its structured reason,
// anything else on one line.
func printError(w io.Writer, err error) {
	if u := client.UnenforceableFrom(err); u != nil {
		printRefusal(w, u)
		return
	}
	fmt.Fprintf(w, "sandboxctl: %v\n", err)
}
