// Command supervisor shows a worker supervisor on sandboxd: it starts N
// workers, each a session of its own running the same command with
// WORKER=i in its environment, follows their state changes and denials
// as they happen (Watch), and when every worker has ended reports how
// each ended, exiting 1 if any failed.
//
// Run inside a sandbox whose policy allows children (sandboxctl run
// --allow-children), it needs no flags: $SANDBOXD_SOCKET is that
// sandbox's own socket, so the workers are child sessions, each at most as
// wide as the supervisor's sandbox and killed with it, and Watch sees
// that subtree only. Outside any sandbox the workers are sessions of the
// caller's own.
//
//	sandboxctl run --allow-children --write /var/tmp/work -- \
//	    ./supervisor -n 3 --write /var/tmp/work -- sh -c 'echo $WORKER > /var/tmp/work/$WORKER'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func main() {
	socket := flag.String("socket", "", "daemon socket (default: $SANDBOXD_SOCKET, else the daemon's default)")
	n := flag.Int("n", 2, "number of workers")
	write := flag.String("write", "", "a directory the workers may write (default: none)")
	flag.Parse()
	if flag.NArg() == 0 || *n < 1 {
		fmt.Fprintln(os.Stderr, "usage: supervisor [-n N] [--write DIR] -- CMD [ARG...]")
		os.Exit(2)
	}
	os.Exit(supervise(*socket, *n, *write, flag.Args()))
}

func supervise(socket string, n int, write string, argv []string) int {
	// An interrupt cancels the workers' streams, and the daemon ends
	// sessions whose starting stream is gone.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cl, err := client.Dial(ctx, socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervisor: %v\n", err)
		return 1
	}
	defer cl.Close()

	var mu sync.Mutex
	workers := map[string]int{} // session id -> worker number
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		watched <- cl.Watch(watchCtx, &sandboxdv1.WatchRequest{}, func(ev *sandboxdv1.Event) error {
			mu.Lock()
			i, ok := workers[ev.GetSessionId()]
			mu.Unlock()
			if ok {
				fmt.Fprintf(os.Stderr, "supervisor: worker %d: %s\n", i, describe(ev))
			}
			return nil
		})
	}()

	results := make([]string, n)
	failed := false
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cl.Run(ctx, client.RunOptions{
				Start: &sandboxdv1.Start{Policy: workerPolicy(write), Command: &sandboxdv1.Command{
					Argv: argv, Env: map[string]string{"WORKER": strconv.Itoa(i)},
				}},
				Stdout: prefixed(i), Stderr: prefixed(i),
				OnStarted: func(id string) {
					mu.Lock()
					workers[id] = i
					mu.Unlock()
				},
			})
			code := client.ExitCode(res, err)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				results[i] = fmt.Sprintf("worker %d: %v (exit %d)", i, err, code)
			default:
				results[i] = fmt.Sprintf("worker %d: session %s %s, exit %d", i, res.SessionID, client.StateName(res.Exit.GetState()), code)
			}
			failed = failed || code != 0
		}()
	}
	wg.Wait()
	stopWatch()
	if err := <-watched; err != nil {
		fmt.Fprintf(os.Stderr, "supervisor: watch: %v\n", err)
	}
	for _, r := range results {
		fmt.Println(r)
	}
	if failed {
		return 1
	}
	return 0
}

// workerPolicy is what each worker may do. Inside the supervisor's
// sandbox, what it leaves out is inherited from that sandbox, and asking
// for more than the sandbox has is refused.
func workerPolicy(write string) *sandboxdv1.Policy {
	p := &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}}
	if write != "" {
		p.Filesystem = &sandboxdv1.Filesystem{Write: []string{write}}
	}
	return p
}

func describe(ev *sandboxdv1.Event) string {
	if d := ev.GetDenial(); d != nil {
		return fmt.Sprintf("denied %s %s (%s, %s)", d.GetOperation(), d.GetTarget(), d.GetField(), d.GetErrno())
	}
	st := ev.GetState()
	s := client.StateName(st.GetTo())
	if r := st.GetReason(); r != "" {
		s += ": " + r
	}
	return s
}

// prefixed writes a worker's output to stdout with the worker's number in
// front of each line, so that the workers' lines can be told apart (a
// line that arrives in two pieces gets it twice).
type prefixed int

func (p prefixed) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(string(b), "\n")
	var out strings.Builder
	for _, l := range lines {
		if l != "" {
			fmt.Fprintf(&out, "[%d] %s", int(p), l)
		}
	}
	if _, err := os.Stdout.WriteString(out.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}
