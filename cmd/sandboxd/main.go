// Command sandboxd is the sandbox launcher daemon: it serves the Sandboxd
// gRPC service on a unix socket (a named pipe on Windows) and starts every
// requested command inside a sandbox enforcing the request's policy. With
// --self-test it only checks the host and reports what it can enforce. On
// Windows, `sandboxd install` and `sandboxd uninstall` provision the host
// and register or remove the service that runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/internal/doctor"
	"github.com/sandboxd/sandboxd/internal/socketpath"
	"github.com/sandboxd/sandboxd/internal/statedir"
	"github.com/sandboxd/sandboxd/netproxy"
	"github.com/sandboxd/sandboxd/selftest"
)

// sysmonAwakeErr is why keepSysmonAwake could not run the daemon with its
// runtime monitor awake, for the log: the daemon works without it, at more
// CPU per launch.
var sysmonAwakeErr error

// warnSysmonAsleep logs sysmonAwakeErr, if any, as what it is: a warning
// of a daemon that runs on without what it failed to set.
func warnSysmonAsleep(logger *log.Logger) {
	if sysmonAwakeErr != nil {
		logger.Printf("warning: running with the Go runtime's monitor thread left to sleep deeply (more CPU per launch; see docs/performance.md): %v", sysmonAwakeErr)
	}
}

func main() {
	// A re-exec of this binary as a sandbox's init or as the self-test's
	// probe must not parse flags or start a server; neither returns then.
	runInitIfRequested()
	selftest.RunProbeIfRequested()
	keepSysmonAwake()
	if code, ok := runService(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// command is a subcommand of this OS (see commands). flags are the daemon
// flags given before it, as given, for a command that installs the daemon
// to run with them; stateDir is the state directory they select.
type command func(flags []string, stateDir string, stdout, stderr io.Writer) int

// run runs the daemon until ctx is done or a signal asks it to stop, or
// runs the subcommand args name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", socketpath.Default(), "unix socket, on Windows named pipe, to listen on (env "+socketpath.Env+")")
	uid := fs.Uint("sandbox-uid", daemon.DefaultSandboxID, "uid sandboxes run as when the caller is root (not 65534: that is the overflow id every unmapped owner shows as)")
	gid := fs.Uint("sandbox-gid", daemon.DefaultSandboxID, "gid sandboxes run as when the caller is root")
	mechanism := fs.String("mechanism", "", "mechanism `SET` to enforce every policy with: namespaces or landlock on Linux, seatbelt on macOS, restricted-token on Windows (default: chosen per policy)")
	socketGroup := fs.String("socket-group", "", "`GROUP` (name or gid) whose members may connect to the 0660 socket (default: the daemon's group)")
	operators := fs.String("operators-group", "", "`GROUP` (name or gid) whose members see, watch and kill every session, and control only their own (no input, other signals or layer changes to others'); others see their own")
	sessionDir := fs.String("session-socket-dir", "", "`DIR` for the sockets of sessions that may start children (default: sandboxd-sessions beside --socket)")
	scrollback := fs.Int("scrollback", daemon.DefaultScrollback, "`BYTES` of each session's recent output kept for attach")
	stateDir := fs.String("state-dir", statedir.Default(), "`DIR` the audit log is kept in (audit.log, JSON lines, rotated by size), and on Windows the sandbox users' credentials and the journal of ACL entries (env "+statedir.Env+")")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics, e.g. 127.0.0.1:9464 (default: none)")
	proxyHosts := fs.String("proxy-hosts", "", "hosts-format `FILE` (ADDR NAME...) of names the allowlist proxy resolves as written there, even to loopback, instead of through DNS (default: none)")
	maxConns := fs.Int("max-connections", daemon.DefaultMaxConnections, "connections one caller (a uid; a session on its own socket) may have open; beyond them the daemon closes new ones at once")
	maxStreams := fs.Int("max-streams", daemon.DefaultMaxStreams, "Session and Watch streams one caller may have open; beyond them new ones are refused with RESOURCE_EXHAUSTED")
	maxSessions := fs.Int("max-sessions", daemon.DefaultMaxSessions, "sessions not yet ended (detached ones included) one caller may have, its sandboxes' child sessions included; beyond them a Start is refused with RESOURCE_EXHAUSTED")
	maxLaunches := fs.Int("max-launches", daemon.DefaultMaxLaunches, "Starts of one caller accepted and not yet running (queued for a launch slot or being built); beyond them a Start is refused with RESOURCE_EXHAUSTED")
	nat64 := fs.String("nat64-prefix", "", "the network's NAT64 `PREFIX` (64:ff9b:1::/64, say; length 32, 40, 48, 56, 64 or 96): the allowlist proxy reads the IPv4 address an address under it embeds at that length alone, to refuse those that lead to the host or its internal services; addresses under the local-use 64:ff9b:1::/48 outside it (all of them, without it) are read at every length, and one refused at any of them is refused (64:ff9b::/96 is always read at 96)")
	maxProxyConns := fs.Int("max-proxy-connections", daemon.DefaultMaxProxyConnections, "connections to the outside that the allowlist proxies and loopback forwards of one caller's sessions (a uid's, its sessions' children included) may hold open together; beyond them a tunnel or request is refused with 503 (Retry-After: 1) or SOCKS reply 1, a forwarded connection is closed, and each is a denial")
	proxyConns := fs.Int("proxy-connections", daemon.DefaultProxyConnections, "connections to the outside that the allowlist proxies and loopback forwards of all sessions may hold open together; beyond them each is refused as beyond --max-proxy-connections")
	keepalive := fs.Duration("keepalive", daemon.DefaultKeepalive, "ping a connection silent this long, and close it (with its streams) when the ping is not answered within a third of it")
	firstMessage := fs.Duration("first-message-timeout", daemon.DefaultFirstMessageTimeout, "how long a Session stream may take to send its Start or Attach before it is ended with DEADLINE_EXCEEDED")
	retainEnded := fs.Int("retain-ended", daemon.DefaultRetainEnded, "ended sessions kept inspectable (exit code, scrollback) per owner; one owner's sessions never push out another's")
	retainFor := fs.Duration("retain-ended-for", daemon.DefaultRetainEndedFor, "how long an ended session stays inspectable at most")
	initPath := fs.String("init", "", "Linux: the sandbox init `PATH`, for packages that install it apart from the daemon, e.g. under /usr/libexec/sandboxd (default: sandboxd-init beside this binary)")
	selfTest := fs.Bool("self-test", false, "start no server: run the self-test, print what this host can enforce (as sandboxctl doctor does), exit 0 if the self-test passed and 1 if not")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cmd := commands[fs.Arg(0)]
	if fs.NArg() > 1 || fs.NArg() == 1 && cmd == nil {
		fmt.Fprintf(stderr, "sandboxd: unexpected arguments %q\n", fs.Args())
		return 2
	}
	for name, v := range map[string]uint{"--sandbox-uid": *uid, "--sandbox-gid": *gid} {
		if v == 0 || v > math.MaxUint32 {
			fmt.Fprintf(stderr, "sandboxd: %s %d: must be an unprivileged id, 1 to %d\n", name, v, uint32(math.MaxUint32))
			return 2
		}
	}
	for name, v := range map[string]int{"--retain-ended": *retainEnded, "--max-connections": *maxConns, "--max-streams": *maxStreams, "--max-sessions": *maxSessions, "--max-launches": *maxLaunches, "--max-proxy-connections": *maxProxyConns, "--proxy-connections": *proxyConns} {
		if v <= 0 {
			fmt.Fprintf(stderr, "sandboxd: %s %d: must be positive\n", name, v)
			return 2
		}
	}
	for name, v := range map[string]time.Duration{"--keepalive": *keepalive, "--first-message-timeout": *firstMessage, "--retain-ended-for": *retainFor} {
		if v <= 0 {
			fmt.Fprintf(stderr, "sandboxd: %s %v: must be positive\n", name, v)
			return 2
		}
	}
	if *scrollback <= 0 {
		fmt.Fprintf(stderr, "sandboxd: --scrollback %d: must be positive\n", *scrollback)
		return 2
	}
	err := daemon.CheckMechanismSet(*mechanism)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: --mechanism: %v\n", err)
		return 2
	}
	var nat64Prefix netip.Prefix
	if *nat64 != "" {
		if nat64Prefix, err = parseNAT64Prefix(*nat64); err != nil {
			fmt.Fprintf(stderr, "sandboxd: --nat64-prefix: %v\n", err)
			return 2
		}
	}
	var pinned map[string][]netip.Addr
	if *proxyHosts != "" {
		if pinned, err = readProxyHosts(*proxyHosts); err != nil {
			fmt.Fprintf(stderr, "sandboxd: --proxy-hosts: %v\n", err)
			return 2
		}
	}
	if cmd != nil {
		if *selfTest {
			fmt.Fprintf(stderr, "sandboxd: --self-test runs no daemon, so there is none to %s\n", fs.Arg(0))
			return 2
		}
		return cmd(args[:len(args)-fs.NArg()], *stateDir, stdout, stderr)
	}
	logger := log.New(stderr, "sandboxd: ", log.LstdFlags)
	warnSysmonAsleep(logger)
	// The backend's state is the host's (on Windows the sandbox users
	// that install made), which the self-test needs too.
	// The socket's directory is the daemon's runtime directory, as it is
	// for the session sockets.
	runtimeDir := ""
	if abs, err := filepath.Abs(*socket); err == nil {
		runtimeDir = filepath.Dir(abs)
	}
	backend, err := daemon.DefaultBackend(daemon.BackendOptions{SandboxUID: uint32(*uid), SandboxGID: uint32(*gid), MechanismSet: *mechanism, StateDir: *stateDir, SelfTest: *selfTest, InitPath: *initPath, RuntimeDir: runtimeDir, Logf: logger.Printf})
	if err != nil {
		logger.Printf("%v", err)
		return 1
	}
	if *selfTest {
		// A check of the host, not a daemon: it keeps no audit trail and
		// must not take the state directory from a running daemon.
		*stateDir, *metricsAddr = "", ""
	}
	svc, err := daemon.New(daemon.Config{
		Backend:             backend,
		SandboxUID:          uint32(*uid),
		SandboxGID:          uint32(*gid),
		SocketPath:          *socket,
		SessionSocketDir:    *sessionDir,
		OperatorsGroup:      *operators,
		SocketGroup:         *socketGroup,
		ScrollbackBytes:     *scrollback,
		StateDir:            *stateDir,
		MetricsAddr:         *metricsAddr,
		ProxyHosts:          pinned,
		NAT64Prefix:         nat64Prefix,
		Quotas:              daemon.Quotas{Connections: *maxConns, Streams: *maxStreams, Sessions: *maxSessions, Launches: *maxLaunches, ProxyConnections: *maxProxyConns},
		ProxyConnections:    *proxyConns,
		FirstMessageTimeout: *firstMessage,
		Keepalive:           *keepalive,
		RetainEnded:         *retainEnded,
		RetainEndedFor:      *retainFor,
		Logf:                logger.Printf,
	})
	if err != nil {
		logger.Printf("%v", err)
		return 1
	}
	defer svc.Close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
	defer stop()
	if *selfTest {
		return selfTestOnly(ctx, svc, stdout)
	}
	daemon.KeepGCFloor(daemon.GCFloor)
	if err := svc.ListenAndServe(ctx); err != nil {
		logger.Printf("%v", err)
		return 1
	}
	logger.Printf("stopped")
	return 0
}

// parseNAT64Prefix parses a network's NAT64 prefix (see
// netproxy.CheckNAT64Prefix).
func parseNAT64Prefix(v string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p, netproxy.CheckNAT64Prefix(p)
}

func readProxyHosts(path string) (map[string][]netip.Addr, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hosts, err := netproxy.ParseHosts(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return hosts, nil
}

// selfTestOnly runs the self-test and prints the report sandboxctl doctor
// would show, for checking a host before (or without) running the daemon.
func selfTestOnly(ctx context.Context, svc *daemon.Service, stdout io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, daemon.SelfTestTimeout)
	defer cancel()
	st := svc.RunSelfTest(ctx)
	doctor.Print(stdout, svc.Capabilities(ctx))
	if !st.GetPassed() {
		return 1
	}
	return 0
}
