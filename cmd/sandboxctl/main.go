// Command sandboxctl is the client and operator CLI of sandboxd: it runs
// commands in sandboxes through the daemon, attached or detached, attaches
// to sessions, lists, inspects and kills them, and reports what the
// daemon's host can enforce. One file per verb.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/sandboxd/sandboxd/api/client"
	_ "github.com/sandboxd/sandboxd/cmd/sandboxctl/internal/mainstack"
	"github.com/sandboxd/sandboxd/cmd/sandboxctl/internal/oneproc"
)

// Exit codes of sandboxctl itself. run and attach use client.ExitCode
// (the command's code, 125, 126, 127, 128+N); their own failures are
// client.ExitDaemonFailed (125) so that they never look like the command's
// exit code. A command line sandboxctl cannot make sense of exits
// exitUsage on every verb, before anything is sent to the daemon. The
// other verbs exit exitFailed when the daemon refuses or fails, as does
// attach for a missing session.
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
	"ps":         {"list live sessions (-a: ended ones too)", psVerb},
	"inspect":    {"show a session as JSON", inspectVerb},
	"logs":       {"print the output the daemon kept of a session", logsVerb},
	"screen":     {"print what a PTY session's terminal shows now", screenVerb},
	"kill":       {"signal or kill a session", killVerb},
	"doctor":     {"show what the host can enforce and the self-test", doctorVerb},
	"events":     {"follow session state changes and denials", eventsVerb},
	"top":        {"ps, refreshed as sessions change", topVerb},
	"export-oci": {"write the OCI runtime config that enforces a policy as sandboxd does", exportOCIVerb},
	"import":     {"print the policy file that srt or Codex sandbox settings mean", importVerb},
	"profiles":   {"list the agent profiles run --profile takes, and where each comes from", profilesVerb},
	"diff":       {"show what a --layer session changed", diffVerb},
	"commit":     {"apply what a --layer session changed to its paths", commitVerb},
	"discard":    {"drop what a --layer session changed", discardVerb},
	"layers":     {"list the layers of --layer sessions not yet committed or discarded", layersVerb},
}

// $GOMAXPROCS, which oneproc's initialiser runs too early to read, wins
// over its one processor as it would over the runtime's default.
func init() {
	oneproc.Honour(os.LookupEnv("GOMAXPROCS"))
}

func main() {
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(c.main(context.Background(), os.Args[1:]))
}

func (c *cli) main(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("sandboxctl", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&c.socket, "socket", "", "daemon socket (default: $SANDBOXD_SOCKET, else the daemon's default socket)")
	version := fs.Bool("version", false, "print the version and the commit sandboxctl was built from, and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sandboxctl [--socket PATH] COMMAND [ARGS...]\n\ncommands:\n")
		for _, name := range verbNames() {
			fmt.Fprintf(fs.Output(), "  %-10s %s\n", name, verbs[name].summary)
		}
		fmt.Fprintf(fs.Output(), "\nglobal flags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nRun 'sandboxctl COMMAND --help' for a command's flags. A command line\nsandboxctl cannot make sense of exits %d.\n", exitUsage)
	}
	if code, ok := c.parseFlags(fs, args); !ok {
		return code
	}
	if *version {
		fmt.Fprintln(c.stdout, versionLine(buildInfo()))
		return 0
	}
	if fs.NArg() == 0 {
		// Asked for nothing: the commands, where a script's mistake is
		// seen, and not a success.
		fs.Usage()
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		if len(rest) == 0 {
			c.printHelp(fs)
			return 0
		}
		name, rest = rest[0], []string{"--help"}
	}
	v, ok := verbs[name]
	if !ok {
		c.usageError("sandboxctl", fmt.Sprintf("unknown command %q%s", name, didYouMean(name, verbNames(), strconv.Quote)))
		return exitUsage
	}
	return v.run(ctx, c, rest)
}

func verbNames() []string {
	names := make([]string, 0, len(verbs))
	for name := range verbs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (c *cli) dial(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, c.socket)
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
