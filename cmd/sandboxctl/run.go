package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
when signal N killed it, and 2, before anything runs, when the command line
is wrong (an unknown flag, a value that does not parse, no CMD). With --json
the last line of stdout is the session's status as one JSON object:
session_id, state, exit_code, signal, reason, and error and refusal when it
was refused.

The policy is built in layers: --preset, then --policy FILE on top of it, then
--profile, then the other flags (lists are appended, set values override).
Without any, the sandbox reads everything, writes nothing and has no network.

With --layer PATH the command may change PATH as it likes, but the changes
land in a layer the daemon keeps and PATH is left as it was: 'sandboxctl diff
ID' shows them, 'sandboxctl commit ID' applies them to PATH, 'sandboxctl
discard ID' drops them. --layer-from ID starts on what session ID left in its
layers instead of on PATH alone.

Relative paths given to --write, --read-only, --deny, --layer and --cwd are made
absolute against the current directory, and so are those in a --policy file,
where "~/" stands for $HOME and enum values may be written as the flags write
them ("none" as well as "NONE"). CMD runs in --cwd, by default the current
directory.

--allow-host limits the network to the hosts given, reached through a proxy
the daemon runs. PATTERN is a name, *.domain for every name under domain (not
domain itself), or an IP literal; an IPv6 literal takes a port only in
brackets, as in [::1]:443. Without a port, every port is allowed.

Sizes for --memory and --output-limit are bytes, or end in K, M, G or T, all
1024-based: 64M, 64MiB and 64MB are the same.

With --detach, run prints only the session's id once the daemon has started
it, and exits 0; the session runs on until CMD exits, it is killed or its
--timeout ends, and the daemon keeps the end of its output for 'sandboxctl
attach ID'. No input is forwarded and no signals: attach for that. With --tty
the session's terminal starts at the size of the local one, which stays as it
is. A refusal or a CMD that cannot be started exits as without --detach.

Inside a sandbox whose policy allows children, $SANDBOXD_SOCKET is its own
socket: the daemon narrows the policy against the sandbox's own. What the
flags leave out is the sandbox's (--deny or --read-only alone keeps its write
roots), and a flag that would widen it (say --network host under network
none) is refused with the field named (exit 125).

flags:
`

// sessionEnv is set in every sandbox to its session's id.
const sessionEnv = "SANDBOXD_SESSION"

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// optional is a flag whose value is parsed later and that knows whether it
// was given at all: "--memory=" is a mistake, not "no limit".
type optional struct {
	value string
	set   bool
}

func (o *optional) String() string     { return o.value }
func (o *optional) Set(v string) error { o.value, o.set = v, true; return nil }

// runFlags are the flags of sandboxctl run, as given. Limits stay text
// until start, so that a bad value is reported with its flag's name.
type runFlags struct {
	write, readOnly, deny, env, allowHosts stringList
	layers                                 stringList
	layerFrom                              string
	layerLimit                             optional
	network, cwd, policyFile               string
	preset                                 string
	tty, detach, children                  bool
	timeout                                time.Duration
	memory, pids, cpus, outputLimit        optional
	// ociFile is run's --oci; base is the policy read from it, under
	// what the other flags add.
	ociFile string
	base    *sandboxdv1.Policy
	// profiles are run's --profile; profilePolicy is what they add,
	// over base and under the other flags.
	profiles      stringList
	profilePolicy *sandboxdv1.Policy
}

// parseRun turns sandboxctl run's arguments into the session's Start
// message. wd is the client's current directory, against which relative
// paths are resolved. For --help it writes the usage to out and returns
// flag.ErrHelp. An error is the command line's (exitUsage) unless it is a
// policyError.
func parseRun(args []string, wd string, out io.Writer) (*sandboxdv1.Start, error) {
	start, _, err := parseRunJSON(args, wd, out)
	return start, err
}

// parseRunJSON is parseRun that also says whether --json was given.
func parseRunJSON(args []string, wd string, out io.Writer) (_ *sandboxdv1.Start, asJSON bool, _ error) {
	var f runFlags
	fs := flag.NewFlagSet("sandboxctl run", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	f.register(fs)
	fs.StringVar(&f.ociFile, "oci", "", "run the OCI runtime config `FILE` (config.json): its process, and a policy from what sandboxd enforces of it; flags add to it")
	fs.Var(&f.profiles, "profile", "add agent profile `NAME`: its home directories writable (made if missing), its API hosts as the allowlist, the environment it reads (repeatable; see sandboxctl profiles)")
	fs.BoolVar(&asJSON, "json", false, "when the session ends (or is refused, or detached), print its status as one JSON object, the last line of stdout")
	if err := parseQuietly(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
		}
		return nil, false, err
	}
	if err := f.applyProfiles(); err != nil {
		return nil, false, err
	}
	var start *sandboxdv1.Start
	var err error
	switch {
	case f.ociFile != "":
		start, err = f.startOCI(fs.Args(), wd)
	case fs.NArg() == 0:
		err = errors.New("missing command")
	default:
		start, err = f.start(fs.Args(), wd)
	}
	return start, asJSON, err
}

// register adds the flags that make a sandbox's policy and command to fs.
func (f *runFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.write, "write", "writable root `PATH` (repeatable)")
	fs.Var(&f.readOnly, "read-only", "read-only carve-out `PATH` inside a writable root (repeatable)")
	fs.Var(&f.deny, "deny", "`PATH` neither readable nor writable (repeatable)")
	fs.Var(&f.layers, "layer", "copy-on-write `PATH`: writable in the sandbox, changes kept in a layer for 'sandboxctl diff' and 'commit' (repeatable)")
	fs.StringVar(&f.layerFrom, "layer-from", "", "start the layers on those of the ended session `ID` (its paths are layered too)")
	fs.Var(&f.layerLimit, "layer-limit", "most each layer may hold, `SIZE`, e.g. 1G: beyond it the session is killed")
	fs.StringVar(&f.network, "network", "", "network `MODE`: none, host or allowlist (default none; allowlist if --allow-host is given)")
	fs.Var(&f.allowHosts, "allow-host", "let the sandbox reach only `PATTERN[:PORT]`, through the daemon's proxy (repeatable; selects network allowlist)")
	fs.StringVar(&f.cwd, "cwd", "", "working `DIR` of the command (default: the current directory)")
	fs.Var(&f.env, "env", "environment variable `K=V` added to PATH, HOME, TERM and LANG (repeatable)")
	fs.BoolVar(&f.tty, "tty", false, "run in a pseudo-terminal; a local terminal is put in raw mode")
	fs.BoolVar(&f.detach, "detach", false, "start the session, print its id and exit; it runs on for 'sandboxctl attach'")
	fs.StringVar(&f.policyFile, "policy", "", "Policy message as protojson `FILE`; flags add to it")
	fs.StringVar(&f.preset, "preset", "", "start from a preset `NAME`: "+strings.Join(policy.PresetNames(), ", "))
	fs.BoolVar(&f.children, "allow-children", false, "let the sandbox start child sandboxes, each at most as wide as itself, through its own socket ($SANDBOXD_SOCKET inside)")
	fs.Var(durationFlag{&f.timeout}, "timeout", "wall-clock limit of the session, a `DURATION` such as 30s or 5m")
	fs.Var(&f.memory, "memory", "memory limit `SIZE`, e.g. 512M or 2G")
	fs.Var(&f.pids, "pids", "limit of `N` processes and threads")
	fs.Var(&f.cpus, "cpus", "CPU quota of `N` CPUs, e.g. 0.5 or 2")
	fs.Var(&f.outputLimit, "output-limit", "output limit `SIZE`, e.g. 10M: output beyond it is dropped, the command runs on")
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
			return nil, policyError{fmt.Errorf("--policy: %w", err)}
		}
		home, _ := os.UserHomeDir()
		p, err := policy.DecodeFile(data, home, wd)
		if err != nil {
			return nil, policyError{fmt.Errorf("--policy %s: %w", f.policyFile, err)}
		}
		pol = policy.Merge(pol, p)
	}
	if f.base != nil {
		pol = policy.Merge(pol, f.base)
	}
	pol = policy.Merge(pol, f.profilePolicy)

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
	if fsys.Layer, err = absAll("layer", f.layers); err != nil {
		return nil, err
	}
	if len(fsys.Write)+len(fsys.ReadOnly)+len(fsys.Deny)+len(fsys.Layer) > 0 {
		extra.Filesystem = fsys
	}
	if extra.Network, err = f.networkPolicy(); err != nil {
		return nil, err
	}
	if extra.Limits, err = f.limits(); err != nil {
		return nil, err
	}
	if f.children {
		extra.Children = &sandboxdv1.Children{Allow: true}
	}
	pol = policy.Merge(pol, extra)
	// The daemon validates too; checking here names the offending flag's
	// entry before anything is dialed. Not inside a sandbox: there the
	// daemon first fills in what the flags leave out from the sandbox's
	// own policy (a --read-only alone keeps its write roots), which only
	// the daemon knows.
	if os.Getenv(sessionEnv) == "" {
		if err := policy.Validate(pol); err != nil {
			return nil, policyError{fmt.Errorf("policy: %w", err)}
		}
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
		Policy:    pol,
		Command:   &sandboxdv1.Command{Argv: argv, Env: env, Cwd: cwd},
		Tty:       f.tty,
		Detach:    f.detach,
		LayerFrom: f.layerFrom,
	}, nil
}

// policyError is a policy that the command line names well enough but
// that is refused, by sandboxctl on the daemon's behalf: a --policy or
// --oci file that cannot be read or decoded, or a policy the daemon would
// refuse. sandboxctl run exits 125 for it, as for the daemon's refusal.
type policyError struct{ err error }

func (e policyError) Error() string { return e.err.Error() }
func (e policyError) Unwrap() error { return e.err }

// networkPolicy is what --network and --allow-host ask for, nil for
// neither.
func (f *runFlags) networkPolicy() (*sandboxdv1.Network, error) {
	switch f.network {
	case "":
	case "none", "host":
		if len(f.allowHosts) > 0 {
			return nil, fmt.Errorf("--allow-host %s with --network %s: --allow-host selects network allowlist; drop --network %s or write --network allowlist", f.allowHosts[0], f.network, f.network)
		}
		if f.network == "none" {
			return &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}, nil
		}
		return &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}, nil
	case "allowlist":
		if len(f.allowHosts) == 0 {
			return nil, errors.New("--network allowlist needs at least one --allow-host")
		}
	default:
		return nil, fmt.Errorf("--network %q: want none, host or allowlist", f.network)
	}
	if len(f.allowHosts) == 0 {
		return nil, nil
	}
	n := &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST}
	for _, h := range f.allowHosts {
		a, err := policy.ParseAllow(h)
		if err != nil {
			return nil, fmt.Errorf("--allow-host %w", err)
		}
		n.Allow = append(n.Allow, a)
	}
	return n, nil
}

// limits is what --timeout, --memory, --pids, --cpus and --output-limit ask
// for, nil for none of them. A flag cannot ask for 0, "no limit": policy.Merge
// reads 0 as "not set", so it would silently keep a --policy file's limit.
func (f *runFlags) limits() (*sandboxdv1.Limits, error) {
	l := &sandboxdv1.Limits{}
	if f.timeout < 0 {
		return nil, fmt.Errorf("--timeout %v: must not be negative", f.timeout)
	}
	if f.timeout > 0 {
		l.Timeout = durationpb.New(f.timeout)
	}
	var err error
	if l.MemoryBytes, err = parseSizeFlag("memory", f.memory); err != nil {
		return nil, err
	}
	if l.OutputBytes, err = parseSizeFlag("output-limit", f.outputLimit); err != nil {
		return nil, err
	}
	if l.LayerBytes, err = parseSizeFlag("layer-limit", f.layerLimit); err != nil {
		return nil, err
	}
	if f.pids.set {
		n, err := strconv.ParseUint(f.pids.value, 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--pids %q: want a whole number from 1 to %d", f.pids.value, uint32(math.MaxUint32))
		}
		l.Pids = uint32(n)
	}
	if f.cpus.set {
		if l.CpuMillis, err = parseCPUs(f.cpus.value); err != nil {
			return nil, err
		}
	}
	if l.Timeout == nil && l.MemoryBytes == 0 && l.OutputBytes == 0 && l.LayerBytes == 0 && l.Pids == 0 && l.CpuMillis == 0 {
		return nil, nil
	}
	return l, nil
}

// parseSizeFlag parses the SIZE of flag name, 0 when it was not given.
func parseSizeFlag(name string, v optional) (uint64, error) {
	if !v.set {
		return 0, nil
	}
	n, err := policy.ParseSize(v.value)
	if err != nil {
		return 0, fmt.Errorf("--%s %w", name, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("--%s %q: must be above 0; leave the flag out for no limit", name, v.value)
	}
	return n, nil
}

// parseCPUs turns a decimal number of CPUs into thousandths of a CPU,
// rounded to the nearest. It works on the digits rather than a float so
// that "0.0005" and "0.0015" round the same way on every machine and no
// exponent or NaN gets through.
func parseCPUs(s string) (uint32, error) {
	const maxCPUs = "4294967.295" // math.MaxUint32 thousandths
	whole, frac, hasFrac := strings.Cut(s, ".")
	if !allDigits(whole) || (hasFrac && !allDigits(frac)) {
		return 0, fmt.Errorf("--cpus %q: want a decimal number of CPUs, as in 0.5 or 2", s)
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > math.MaxUint32/1000+1 {
		return 0, fmt.Errorf("--cpus %q: above the largest quota, %s CPUs", s, maxCPUs)
	}
	digits := (frac + "0000")[:4]
	milli, _ := strconv.ParseUint(digits[:3], 10, 64)
	millis := w*1000 + milli
	if digits[3] >= '5' {
		millis++
	}
	switch {
	case millis == 0:
		return 0, fmt.Errorf("--cpus %q: below the smallest quota, 0.001 CPU", s)
	case millis > math.MaxUint32:
		return 0, fmt.Errorf("--cpus %q: above the largest quota, %s CPUs", s, maxCPUs)
	}
	return uint32(millis), nil
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func runVerb(ctx context.Context, c *cli, args []string) int {
	var signals *pendingSignals
	if !mayDetach(args) {
		signals = forwardSignalsAhead(runSignals...)
		defer signals.release()
	}
	dial := c.dialAhead(ctx)
	defer dial.abandon()
	wd, _ := os.Getwd()
	start, asJSON, err := parseRunJSON(args, wd, c.stdout)
	var refused policyError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &refused):
		fmt.Fprintf(c.stderr, "sandboxctl run: %v\n", err)
		if asJSON {
			c.writeStatus(&lastByteWriter{w: c.stdout}, runStatusOf(nil, err, client.ExitDaemonFailed))
		}
		return client.ExitDaemonFailed
	case err != nil:
		c.usageError("sandboxctl run", err.Error())
		return exitUsage
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
	var out *lastByteWriter
	if asJSON {
		out = &lastByteWriter{w: c.stdout}
		c.stdout = out
	}
	res, err := c.session(ctx, dial, signals, start)
	if err == nil && res.Detached && !asJSON {
		fmt.Fprintln(c.stdout, res.SessionID)
	}
	code := c.finish(res, err)
	if asJSON {
		c.writeStatus(out, runStatusOf(res, err, code))
	}
	return code
}

// writeStatus is run --json's last line. Failing to write it changes
// nothing of the exit code, which is the command's.
func (c *cli) writeStatus(out *lastByteWriter, st runStatus) {
	if err := out.writeStatus(st); err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl run: --json: %v\n", err)
	}
}

// pendingDial is a connection made before run knew what to run on it, or
// the error of making it, which waits until the command line is read.
type pendingDial struct {
	cl    *client.Client
	err   error
	taken bool
}

// dialAhead connects to the daemon before run reads its command line and
// resolves the policy: the daemon answers the connection meanwhile, on the
// other core, and the Start goes out without waiting for that answer
// (client.Connect).
func (c *cli) dialAhead(ctx context.Context) *pendingDial {
	cl, err := client.Connect(ctx, c.socket)
	return &pendingDial{cl: cl, err: err}
}

// run runs opts on the connection.
func (d *pendingDial) run(ctx context.Context, opts client.RunOptions) (*client.Result, error) {
	d.taken = true
	if d.err != nil {
		return nil, d.err
	}
	defer d.cl.Close()
	return d.cl.Run(ctx, opts)
}

// abandon closes the connection nobody ran anything on (the command line
// was refused).
func (d *pendingDial) abandon() {
	if !d.taken && d.cl != nil {
		d.cl.Close()
	}
}

// finish prints why a session ended when that needs saying, and returns
// sandboxctl's exit code for it.
func (c *cli) finish(res *client.Result, err error) int {
	switch {
	case err != nil:
		printError(c.stderr, err)
	case res.Exit.GetReason() != "" && res.Exit.GetState() != sandboxdv1.State_EXITED:
		fmt.Fprintf(c.stderr, "sandboxctl: %s: %s\n", strings.ReplaceAll(strings.ToLower(res.Exit.GetState().String()), "_", " "), res.Exit.GetReason())
	}
	return client.ExitCode(res, err)
}

// runSignals are what run forwards to the command.
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// session runs start, on the client dial brings, with the local terminal
// and signals wired to it: those being installed, or nil to install them
// now. The terminal is restored before it returns, so errors print on a
// sane tty.
func (c *cli) session(ctx context.Context, dial *pendingDial, signals *pendingSignals, start *sandboxdv1.Start) (*client.Result, error) {
	// run prints no enforcement report (inspect does), so Started comes
	// without one: a few KiB neither side encodes or decodes on the way to
	// the command.
	start.OmitEnforcement = true
	if start.GetDetach() {
		// Nothing typed here reaches a detached session, so the local
		// terminal only lends it its size.
		if fd := int(c.stdin.Fd()); start.GetTty() && isTerminal(fd) {
			if ws, err := windowSize(fd); err == nil {
				start.Window = &sandboxdv1.WindowSize{Rows: ws.Rows, Cols: ws.Cols}
			}
		}
		return dial.run(ctx, client.RunOptions{Start: start})
	}
	opts := client.RunOptions{
		Start:  start,
		Stdout: c.stdout,
		Stderr: c.stderr,
	}
	if !isDevNull(c.stdin) {
		// Read from /dev/null, stdin would only give EOF, and take a
		// thread of its own to do it: a read of a file that is not a pipe
		// or a socket blocks its thread. Without one the session's stdin
		// is closed at once, as at that EOF.
		opts.Stdin = c.stdin
	}
	if start.GetTty() {
		window, resize, restore, err := c.wireTerminal(true, true)
		if err != nil {
			return nil, fmt.Errorf("--tty: %w", err)
		}
		defer restore()
		if window != nil {
			start.Window = &sandboxdv1.WindowSize{Rows: window.Rows, Cols: window.Cols}
		}
		opts.Resize = resize
	}
	if signals == nil {
		signals = forwardSignalsAhead(runSignals...)
		defer signals.release()
	}
	opts.Signals = signals.ch
	opts.OnStarted = func(string) { signals.wait() }
	return dial.run(ctx, opts)
}

// isDevNull says whether f is the null device.
func isDevNull(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}

// mayDetach says whether run's arguments may ask for --detach, which
// forwards no signals: a signal to such a run ends it, as to any program,
// so forwarding is installed ahead only for a run that cannot be one.
func mayDetach(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "detach" {
			return true
		}
	}
	return false
}

// wireTerminal readies the terminal on stdin, if stdin is one, for a PTY
// session: raw mode when its keys go to the session, and following its
// size when the session follows it. window is its size now, nil when stdin
// is no terminal. restore undoes both; call it before printing.
func (c *cli) wireTerminal(raw, follow bool) (window *client.WindowSize, resize <-chan client.WindowSize, restore func(), err error) {
	fd := int(c.stdin.Fd())
	restore = func() {}
	if !isTerminal(fd) {
		return nil, nil, restore, nil
	}
	if ws, err := windowSize(fd); err == nil {
		window = &ws
	}
	var undo []func()
	if raw {
		r, err := makeRaw(fd)
		if err != nil {
			return nil, nil, restore, err
		}
		undo = append(undo, r)
	}
	if follow {
		ch := make(chan client.WindowSize, 1)
		undo = append(undo, watchResize(fd, ch))
		resize = ch
	}
	return window, resize, func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}, nil
}
