// Command sandboxd is the sandbox launcher daemon: it serves the Sandboxd
// gRPC service on a unix socket and starts every requested command inside a
// sandbox enforcing the request's policy.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/internal/socketpath"
)

func main() {
	// A re-exec of this binary as a sandbox's init must not parse flags or
	// start a server; this never returns in that case.
	runInitIfRequested()
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", socketpath.Default(), "unix socket to listen on (env "+socketpath.Env+")")
	uid := fs.Uint("sandbox-uid", daemon.DefaultSandboxID, "uid sandboxes run as when the caller is root (not 65534: that is the overflow id every unmapped owner shows as)")
	gid := fs.Uint("sandbox-gid", daemon.DefaultSandboxID, "gid sandboxes run as when the caller is root")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sandboxd: unexpected arguments %q\n", fs.Args())
		return 2
	}
	for name, v := range map[string]uint{"--sandbox-uid": *uid, "--sandbox-gid": *gid} {
		if v == 0 || v > math.MaxUint32 {
			fmt.Fprintf(stderr, "sandboxd: %s %d: must be an unprivileged id, 1 to %d\n", name, v, uint32(math.MaxUint32))
			return 2
		}
	}
	logger := log.New(stderr, "sandboxd: ", log.LstdFlags)

	backend, err := daemon.DefaultBackend(daemon.BackendOptions{SandboxUID: uint32(*uid), SandboxGID: uint32(*gid)})
	if err != nil {
		logger.Printf("%v", err)
		return 1
	}
	svc, err := daemon.New(daemon.Config{
		Backend:    backend,
		SandboxUID: uint32(*uid),
		SandboxGID: uint32(*gid),
		SocketPath: *socket,
		Logf:       logger.Printf,
	})
	if err != nil {
		logger.Printf("%v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
	defer stop()
	if err := svc.ListenAndServe(ctx); err != nil {
		logger.Printf("%v", err)
		return 1
	}
	logger.Printf("stopped")
	return 0
}
