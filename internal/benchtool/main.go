//go:build linux

// Command benchtool measures a running sandboxd against the targets
// and, in the same invocation, against the nearest unsandboxed or
// bubblewrap counterpart of each figure, so that the ratios it prints do not
// depend on how fast the machine happens to be today:
//
//	go run ./internal/benchtool --socket S --workspace WS --sandboxctl bin/sandboxctl
//
// scripts/bench.sh builds the binaries, starts a private daemon and runs it.
// The workspace must be writable by the daemon's sandbox uid.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
)

// figures in the order they run and print.
var allFigures = []string{"latency", "sandboxctl", "help", "throughput", "memory", "hold", "pty", "soak", "layers"}

type config struct {
	socket     string
	workspace  string
	sandboxctl string
	goFloor    string
	bwrap      string
	unit       string
	only       []string

	nLatency    int
	nCtl        int
	warmup      int
	duration    time.Duration
	thruRounds  int
	clients     int
	sessions    int
	hold        int
	ptyMiB      int
	ptyRounds   int
	keystrokes  int
	soakClients int

	minAvailMiB int64
	pidReserve  int

	// nLayers and commitFiles are the layers figure's (layers.go).
	nLayers, commitFiles int
}

func parseFlags(args []string) (*config, error) {
	var c config
	var only string
	fs := flag.NewFlagSet("benchtool", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "", "`PATH` of the daemon's socket (default: the client's default)")
	fs.StringVar(&c.workspace, "workspace", "", "workspace `DIR` for the workspace-write preset, writable by the sandbox uid (required)")
	fs.StringVar(&c.sandboxctl, "sandboxctl", "sandboxctl", "`PATH` of the sandboxctl binary, for the sandboxctl figure")
	fs.StringVar(&c.goFloor, "go-floor", "", "`PATH` of a static Go program that only exits (internal/benchtool/gofloor), timed beside sandboxctl --help as the start no Go client avoids; none when empty")
	fs.StringVar(&c.bwrap, "bwrap", "bwrap", "`PATH` of bubblewrap, the counterpart of the launch figures")
	fs.StringVar(&c.unit, "unit", "", "systemd unit `FILE` of the daemon (deploy/sandboxd.service), whose resource limits the hold figure checks one by one")
	fs.StringVar(&only, "only", strings.Join(allFigures, ","), "comma-separated `FIGURES` to run: "+strings.Join(allFigures, ","))
	fs.IntVar(&c.nLatency, "n-latency", 500, "launches of /bin/true per side for the latency figure")
	fs.IntVar(&c.nCtl, "n-sandboxctl", 200, "runs per side for the sandboxctl and help figures")
	fs.IntVar(&c.warmup, "warmup", 10, "uncounted launches per side before each latency series")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "how long each side of the throughput figure runs in each round")
	fs.IntVar(&c.thruRounds, "throughput-rounds", 3, "rounds of the throughput figure, sandboxd then bwrap in each, the launches of each side pooled over them")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients for the throughput figure and for starting sessions")
	fs.IntVar(&c.sessions, "sessions", 1000, "idle sessions for the memory figure")
	fs.IntVar(&c.hold, "hold", 10000, "idle sessions the hold figure tries to keep at once")
	fs.IntVar(&c.ptyMiB, "pty-mib", 32, "MiB each sample of the pty throughput figure moves through the terminal")
	fs.IntVar(&c.ptyRounds, "pty-rounds", 11, "timed rounds of the pty throughput figure, one sample per side each, after one untimed")
	fs.IntVar(&c.keystrokes, "keystrokes", 200, "keystroke round trips timed per side")
	fs.IntVar(&c.soakClients, "soak-clients", 1000, "clients that dial and run a session all at once for the soak figure (its idle CPU uses --sessions)")
	fs.Int64Var(&c.minAvailMiB, "min-available-mib", 3072, "stop starting sessions or processes when MemAvailable falls below this many MiB")
	fs.IntVar(&c.pidReserve, "pid-reserve", 1000, "stop starting sessions or processes when fewer than this many pids are left below kernel.pid_max, so the rest of the machine can still fork")
	fs.IntVar(&c.nLayers, "n-layers", 200, "launches per side for the layers figure (--layer against --write)")
	fs.IntVar(&c.commitFiles, "commit-files", 10000, "changed files in each layer the layers figure commits")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.workspace == "" {
		return nil, errors.New("--workspace is required")
	}
	ws, err := filepath.Abs(c.workspace)
	if err != nil {
		return nil, fmt.Errorf("--workspace: %w", err)
	}
	c.workspace = ws
	if c.unit != "" {
		if c.unit, err = filepath.Abs(c.unit); err != nil {
			return nil, fmt.Errorf("--unit: %w", err)
		}
	}
	for f := range strings.SplitSeq(only, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(allFigures, f) {
			return nil, fmt.Errorf("--only: unknown figure %q (valid: %s)", f, strings.Join(allFigures, ","))
		}
		c.only = append(c.only, f)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"n-latency", c.nLatency}, {"n-sandboxctl", c.nCtl}, {"clients", c.clients}, {"sessions", c.sessions}, {"hold", c.hold}, {"pty-mib", c.ptyMiB}, {"pty-rounds", c.ptyRounds}, {"throughput-rounds", c.thruRounds}, {"keystrokes", c.keystrokes}} {
		if n.v <= 0 {
			return nil, fmt.Errorf("--%s %d: must be positive", n.name, n.v)
		}
	}
	// Paths are resolved now so that the reproduction lines name what ran.
	if c.sandboxctl, err = resolveBinary(c.sandboxctl, c.wants("sandboxctl") || c.wants("help")); err != nil {
		return nil, fmt.Errorf("--sandboxctl: %w", err)
	}
	if c.goFloor != "" {
		if c.goFloor, err = resolveBinary(c.goFloor, c.wants("help")); err != nil {
			return nil, fmt.Errorf("--go-floor: %w", err)
		}
	}
	needBwrap := c.wants("latency") || c.wants("sandboxctl") || c.wants("throughput") || c.wants("memory")
	if c.bwrap, err = resolveBinary(c.bwrap, needBwrap); err != nil {
		return nil, fmt.Errorf("--bwrap: %w (make deps installs bubblewrap)", err)
	}
	return &c, nil
}

func (c *config) wants(figure string) bool { return slices.Contains(c.only, figure) }

// resolveBinary finds name on PATH when needed; an unneeded one that is
// missing is kept as given.
func resolveBinary(name string, needed bool) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		if !needed {
			return name, nil
		}
		return "", err
	}
	return filepath.Abs(p)
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtool: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func run(cfg *config) int {
	// An interrupt cancels ctx; every figure then stops and its deferred
	// cleanup kills what it started (with a context of its own), so nothing
	// is left behind in the daemon or on the host.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := becomeSubreaper(); err != nil {
		warnf("%v; a sandbox whose bwrap is killed during its setup may be left running", err)
	}
	defer func() {
		if n := reapAdopted(cfg.workspace); n > 0 {
			warnf("killed %d leftover processes", n)
		}
	}()

	cl, err := client.Dial(ctx, cfg.socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtool: %v\n", err)
		return 1
	}
	defer cl.Close()
	b := &bench{cfg: cfg, ctx: ctx, cl: cl, socket: cl.Socket()}
	defer b.closeBigList()

	fmt.Printf("benchtool: daemon %s, workspace %s, %d CPUs, %s\n", b.socket, cfg.workspace, numCPU(), kernelRelease())
	failed := false
	for _, f := range allFigures {
		if !cfg.wants(f) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		fmt.Printf("running %s...\n", f)
		begin := time.Now()
		if err := b.figure(f); err != nil {
			if ctx.Err() != nil {
				b.add(row{figure: f, value: "interrupted"})
				break
			}
			failed = true
			b.add(row{figure: f, value: "error", verdict: "ERROR"})
			b.note("%s: %v", f, err)
			fmt.Fprintf(os.Stderr, "benchtool: %s: %v\n", f, err)
		}
		fmt.Printf("  %s took %v\n", f, time.Since(begin).Round(100*time.Millisecond))
	}
	b.print(os.Stdout)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "benchtool: interrupted")
		return 130
	}
	if failed {
		return 1
	}
	return 0
}

func (b *bench) figure(name string) error {
	switch name {
	case "latency":
		return b.latency()
	case "sandboxctl":
		return b.sandboxctlFigure()
	case "help":
		return b.helpFigure()
	case "throughput":
		return b.throughput()
	case "memory":
		return b.memory()
	case "hold":
		return b.holdFigure()
	case "soak":
		return b.soak()
	case "pty":
		return b.ptyFigures()
	case "layers":
		return b.layersFigure()
	}
	return fmt.Errorf("unknown figure %q", name)
}
