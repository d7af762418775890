package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

const runUsage = `usage: sandboxctl run [flags] -- CMD [ARG...]

Runs CMD in a sandbox, streams its output, forwards stdin and SIGINT, SIGTERM
and SIGHUP, and exits with CMD's exit code: 125 when the daemon refused or
failed, 126 when CMD could not be executed, 127 when it was not found, 128+N
when signal N killed it.

The policy is built in layers: --preset, then --policy FILE on top of it, then
the flags (lists are appended, set values override). Without any, the sandbox
reads everything, writes nothing and has no network.

Relative paths given to --write, --read-only, --deny and --cwd are made
absolute against the current directory. Paths in a --policy file must already
be absolute. CMD runs in --cwd, by default the current directory.

flags:
`

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runFlags are the flags of sandboxctl run, as given.
type runFlags struct {
	write, readOnly, deny, env stringList
	network, cwd, policyFile   string
	preset                     string
	tty                        bool
	timeout                    time.Duration
}

// parseRun turns sandboxctl run's arguments into the session's Start
// message. wd is the client's current directory, against which relative
// paths are resolved. It returns flag.ErrHelp for --help.
func parseRun(args []string, wd string, out io.Writer) (*sandboxdv1.Start, error) {
	var f runFlags
	fs := flag.NewFlagSet("sandboxctl run", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	fs.Var(&f.write, "write", "writable root `PATH` (repeatable)")
	fs.Var(&f.readOnly, "read-only", "read-only carve-out `PATH` inside a writable root (repeatable)")
	fs.Var(&f.deny, "deny", "`PATH` neither readable nor writable (repeatable)")
	fs.StringVar(&f.network, "network", "", "network `MODE`: none or host (default none)")
	fs.StringVar(&f.cwd, "cwd", "", "working `DIR` of the command (default: the current directory)")
	fs.Var(&f.env, "env", "environment variable `K=V` added to PATH, HOME, TERM and LANG (repeatable)")
	fs.BoolVar(&f.tty, "tty", false, "run in a pseudo-terminal; a local terminal is put in raw mode")
	fs.StringVar(&f.policyFile, "policy", "", "Policy message as protojson `FILE`; flags add to it")
	fs.StringVar(&f.preset, "preset", "", "start from a preset `NAME`: "+strings.Join(policy.PresetNames(), ", "))
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit of the session as a Go `DURATION`, e.g. 30s or 5m")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() == 0 {
		return nil, errors.New("missing command")
	}
	return f.start(fs.Args(), wd)
}

func (f *runFlags) start(argv []string, wd string) (*sandboxdv1.Start, error) {
	abs := func(flagName, p string) (string, error) {
		if p == "" {
			return "", fmt.Errorf("--%s: empty path", flagName)
		}
		if filepath.IsAbs(p) {
			return filepath.Clean(p), nil
		}
		if wd == "" {
			return "", fmt.Errorf("--%s %s: relative path and the current directory is unknown", flagName, p)
		}
		return filepath.Join(wd, p), nil
	}
	absAll := func(flagName string, ps []string) ([]string, error) {
		var out []string
		for _, p := range ps {
			a, err := abs(flagName, p)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	}

	cwd := wd
	if f.cwd != "" {
		var err error
		if cwd, err = abs("cwd", f.cwd); err != nil {
			return nil, err
		}
	}

	pol := &sandboxdv1.Policy{}
	if f.preset != "" {
		p, err := policy.Preset(f.preset, cwd)
		if err != nil {
			return nil, fmt.Errorf("--preset: %w", err)
		}
		pol = p
	}
	if f.policyFile != "" {
		data, err := os.ReadFile(f.policyFile)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		p, err := policy.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("--policy %s: %w", f.policyFile, err)
		}
		pol = policy.Merge(pol, p)
	}

	extra := &sandboxdv1.Policy{}
	var err error
	fsys := &sandboxdv1.Filesystem{}
	if fsys.Write, err = absAll("write", f.write); err != nil {
		return nil, err
	}
	if fsys.ReadOnly, err = absAll("read-only", f.readOnly); err != nil {
		return nil, err
	}
	if fsys.Deny, err = absAll("deny", f.deny); err != nil {
		return nil, err
	}
	if len(fsys.Write)+len(fsys.ReadOnly)+len(fsys.Deny) > 0 {
		extra.Filesystem = fsys
	}
	switch f.network {
	case "":
	case "none":
		extra.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}
	case "host":
		extra.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
	default:
		return nil, fmt.Errorf("--network %q: want none or host", f.network)
	}
	switch {
	case f.timeout < 0:
		return nil, fmt.Errorf("--timeout %v: must not be negative", f.timeout)
	case f.timeout > 0:
		extra.Limits = &sandboxdv1.Limits{Timeout: durationpb.New(f.timeout)}
	}
	pol = policy.Merge(pol, extra)
	// The daemon validates too; checking here names the offending flag's
	// entry before anything is dialed.
	if err := policy.Validate(pol); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}

	var env map[string]string
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}

	return &sandboxdv1.Start{
		Policy:  pol,
		Command: &sandboxdv1.Command{Argv: argv, Env: env, Cwd: cwd},
		Tty:     f.tty,
	}, nil
}

func runVerb(ctx context.Context, c *cli, args []string) int {
	wd, _ := os.Getwd()
	start, err := parseRun(args, wd, c.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl run: %v\n", err)
		return client.ExitDaemonFailed
	}
	// The program draws for the caller's terminal, so it gets that
	// terminal's type; this is the client's explicit choice, not a leak of
	// the daemon's environment.
	if t := os.Getenv("TERM"); start.Tty && t != "" {
		if _, set := start.Command.Env["TERM"]; !set {
			if start.Command.Env == nil {
				start.Command.Env = map[string]string{}
			}
			start.Command.Env["TERM"] = t
		}
	}
	cl, err := c.dial(ctx)
	if err != nil {
		printError(c.stderr, err)
		return client.ExitDaemonFailed
	}
	defer cl.Close()

	res, err := c.session(ctx, cl, start)
	switch {
	case err != nil:
		printError(c.stderr, err)
	case res.Exit.GetReason() != "" && res.Exit.GetState() != sandboxdv1.State_EXITED:
		fmt.Fprintf(c.stderr, "sandboxctl: %s: %s\n", strings.ReplaceAll(strings.ToLower(res.Exit.GetState().String()), "_", " "), res.Exit.GetReason())
	}
	return client.ExitCode(res, err)
}

// session runs start with the local terminal and signals wired to it. The
// terminal is restored before it returns, so errors print on a sane tty.
func (c *cli) session(ctx context.Context, cl *client.Client, start *sandboxdv1.Start) (*client.Result, error) {
	signals := make(chan int32, 4)
	stopSignals := forwardSignals(signals)
	defer stopSignals()
	opts := client.RunOptions{
		Start:   start,
		Stdin:   c.stdin,
		Stdout:  c.stdout,
		Stderr:  c.stderr,
		Signals: signals,
	}
	fd := int(c.stdin.Fd())
	if start.GetTty() && isTerminal(fd) {
		restore, err := makeRaw(fd)
		if err != nil {
			return nil, fmt.Errorf("--tty: %w", err)
		}
		defer restore()
		if ws, err := windowSize(fd); err == nil {
			start.Window = &sandboxdv1.WindowSize{Rows: ws.Rows, Cols: ws.Cols}
		}
		resize := make(chan client.WindowSize, 1)
		stopResize := watchResize(fd, resize)
		defer stopResize()
		opts.Resize = resize
	}
	return cl.Run(ctx, opts)
}
