// Command agent shows how a coding agent embeds sandboxd: it runs one
// command with write access to the current directory only (its .git, if
// any, read-only) and the network limited to the hosts given, streams the
// command's output as it comes, forwards its own stdin, and exits with the
// command's exit code.
//
// It also shows what to do with a refusal. The allowlist needs the
// daemon's proxy and a network namespace, which some hosts lack; the
// daemon then refuses with the field it cannot enforce instead of running
// the command with less. This agent answers a refusal of the network
// fields by asking for no network at all, which is narrower and so never
// weakens what was asked, and says so; any other refusal ends it.
//
//	go run ./examples/agent --allow-host example.com:443 -- curl -sI https://example.com/
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

func main() {
	socket := flag.String("socket", "", "daemon socket (default: $SANDBOXD_SOCKET, else the daemon's default)")
	allow := flag.String("allow-host", "", "the one HOST[:PORT] the command may reach (default: no network)")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long the command may run")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: agent [--allow-host HOST[:PORT]] [--timeout D] -- CMD [ARG...]")
		os.Exit(2)
	}
	os.Exit(run(*socket, *allow, *timeout, flag.Args()))
}

func run(socket, allow string, timeout time.Duration, argv []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		return client.ExitDaemonFailed
	}
	cl, err := client.Dial(ctx, socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		return client.ExitDaemonFailed
	}
	defer cl.Close()

	pol := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{wd}},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
		Limits:     &sandboxdv1.Limits{Timeout: durationpb.New(timeout)},
	}
	// The repository's history stays out of the command's reach.
	if git := filepath.Join(wd, ".git"); exists(git) {
		pol.Filesystem.ReadOnly = []string{git}
	}
	if allow != "" {
		a, err := policy.ParseAllow(allow)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent: --allow-host %v\n", err)
			return 2
		}
		pol.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{a}}
	}

	res, err := start(ctx, cl, pol, argv, wd)
	if u := client.UnenforceableFrom(err); u != nil && strings.HasPrefix(u.GetField(), "network.") {
		fmt.Fprintf(os.Stderr, "agent: this host cannot enforce %s (needs %s; %s); running with no network instead\n",
			u.GetField(), u.GetMechanism(), u.GetRemedy())
		pol.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}
		res, err = start(ctx, cl, pol, argv, wd)
	}
	if u := client.UnenforceableFrom(err); u != nil {
		fmt.Fprintf(os.Stderr, "agent: refused: cannot enforce %s: needs %s; remedy: %s\n", u.GetField(), u.GetMechanism(), u.GetRemedy())
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
	} else if e := res.Exit; e.GetState() != sandboxdv1.State_EXITED {
		fmt.Fprintf(os.Stderr, "agent: session %s %s: %s\n", res.SessionID, client.StateName(e.GetState()), e.GetReason())
	}
	return client.ExitCode(res, err)
}

// start runs argv to its end in a sandbox under pol, with this process's
// stdio.
func start(ctx context.Context, cl *client.Client, pol *sandboxdv1.Policy, argv []string, wd string) (*client.Result, error) {
	return cl.Run(ctx, client.RunOptions{
		Start: &sandboxdv1.Start{
			Policy:  pol,
			Command: &sandboxdv1.Command{Argv: argv, Cwd: wd},
		},
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	})
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
