package conformance

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// nodeReadline asks a question on its terminal or stdin and waits for the
// answer in node's event loop.
const nodeReadline = `const rl = require("readline").createInterface({input: process.stdin, output: process.stdout});
rl.question("name? ", a => { console.log("hi " + a); process.exit(0); });
`

// nodePending is nodeReadline with an HTTP request through the daemon's
// proxy (node does not read HTTP_PROXY itself) to TARGET, whose server
// never answers.
const nodePending = `const u = new URL(process.env.HTTP_PROXY);
require("http").get({host: u.hostname, port: u.port, path: "http://TARGET/"}, r => console.log("status " + r.statusCode))
  .on("error", e => console.log("error " + e.message));
` + nodeReadline

// pyAsyncio reads a line of stdin in an asyncio loop; with TICK it also
// keeps a timer due every 200ms, as a program retrying or animating does.
const pyAsyncio = `import asyncio, sys
async def tick():
    while True:
        await asyncio.sleep(0.2)
async def main():
    if "TICK" in sys.argv:
        asyncio.create_task(tick())
    loop = asyncio.get_running_loop()
    r = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(r), sys.stdin)
    print("prompt> ", end="", flush=True)
    print("got", (await r.readline()).decode().strip())
asyncio.run(main())
`

// TestEventLoopStates runs real programs that wait in different ways and
// checks the state the daemon tells for each, with its evidence: a session
// is waiting-for-input only when nothing but its input can move it on.
func TestEventLoopStates(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (make deps installs nodejs)")
	}
	// The distribution's python, not a per-user shim (pyenv's under
	// /root) that the sandbox's uid cannot read.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("python3 is not installed in /usr/bin")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	cases := []struct {
		name   string
		policy func(t *testing.T) *sandboxdv1.Policy
		argv   func(t *testing.T) []string
		want   sandboxdv1.State
		// evidence is a verdict and a file kind Inspect must show.
		verdict, kind string
	}{
		{name: "bash read waits for input", argv: func(*testing.T) []string { return []string{bash, "-c", "read x; echo $x"} },
			want: sandboxdv1.State_WAITING_FOR_INPUT, verdict: "input"},
		{name: "cat waits for input", argv: func(*testing.T) []string { return []string{"cat"} },
			want: sandboxdv1.State_WAITING_FOR_INPUT, verdict: "input"},
		{name: "node readline waits for input", argv: func(*testing.T) []string { return []string{node, "-e", nodeReadline} },
			want: sandboxdv1.State_WAITING_FOR_INPUT, verdict: "input"},
		{name: "python asyncio reader waits for input", argv: func(*testing.T) []string { return []string{python, "-c", pyAsyncio} },
			want: sandboxdv1.State_WAITING_FOR_INPUT, verdict: "input"},
		{name: "python asyncio reader with a timer due soon is not waiting for input",
			argv: func(*testing.T) []string { return []string{python, "-c", pyAsyncio, "TICK"} },
			want: sandboxdv1.State_WAITING, verdict: "progress"},
		{name: "node readline with an HTTP request unanswered is not waiting for input",
			policy: func(t *testing.T) *sandboxdv1.Policy {
				if suite.mechanism == "landlock" || !linuxHost.namespaces {
					t.Skip("the landlock set has no network namespace for an allowlist and refuses it (TestAgentProfiles checks the refusal)")
				}
				return allowPolicy(allowEntry(allowedName, silentServer(t)))
			},
			want: sandboxdv1.State_WAITING_FOR_NETWORK, verdict: "network", kind: "tcp"},
	}
	for _, tty := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(pathName(tty)+"/"+tc.name, func(t *testing.T) {
				requireDaemon(t)
				var p *sandboxdv1.Policy
				if tc.policy != nil {
					p = tc.policy(t)
				}
				var argv []string
				if tc.kind == "tcp" {
					port := p.GetNetwork().GetAllow()[0].GetPort()
					argv = []string{node, "-e", strings.ReplaceAll(nodePending, "TARGET", allowedName+":"+strconv.Itoa(int(port)))}
				} else {
					argv = tc.argv(t)
				}
				id, in := startWaiting(t, commandStart(tty, p, nil, argv...))
				info := waitState(t, id, tc.want)
				// The evidence is what the tasks wait on as Inspect
				// answers, the state what the last check found: a
				// ticker firing just then shows a running task. The
				// evidence must come while the state holds.
				for tries := 0; !(info.GetState() == tc.want && hasEvidence(info, tc.verdict, tc.kind)) && tries < 20; tries++ {
					time.Sleep(50 * time.Millisecond)
					info = inspect(t, id)
				}
				if info.GetState() != tc.want || !hasEvidence(info, tc.verdict, tc.kind) {
					t.Errorf("state %v without the evidence (a task with a %q file of kind %q):\n%v", info.GetState(), tc.verdict, tc.kind, info.GetWaits())
				}
				if tc.want == sandboxdv1.State_WAITING_FOR_INPUT {
					// The input moves it on: what it waited for. (cat
					// ends at the end of its input.)
					io.WriteString(in, "ok\n")
					in.Close()
					waitEnded(t, id)
				}
			})
		}
	}
}

// startWaiting starts a session whose input stays open until the test
// ends, and returns its id and its input.
func startWaiting(t *testing.T, start *sandboxdv1.Start) (string, *os.File) {
	t.Helper()
	inR, inW := newPipe(t)
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	ids := make(chan string, 1)
	finished := make(chan struct{})
	out := &syncBuffer{}
	var runErr error
	go func() {
		defer close(finished)
		_, runErr = suite.client.Run(ctx, client.RunOptions{Start: start, Stdin: inR, Stdout: out, Stderr: out,
			OnStarted: func(id string) { ids <- id }})
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	select {
	case id := <-ids:
		return id, inW
	case <-finished:
		t.Fatalf("session ended before the test could look at it: %v\n%s", runErr, out.String())
	}
	return "", nil
}

func waitEnded(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		switch st := inspect(t, id).GetState(); st {
		case sandboxdv1.State_EXITED:
			return
		case sandboxdv1.State_KILLED, sandboxdv1.State_FAILED_TO_START:
			t.Fatalf("session %s ended %v", id, st)
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not end once given its input", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasEvidence says whether some task of info waits with verdict, on a file
// of kind when kind is set.
func hasEvidence(info *sandboxdv1.SessionInfo, verdict, kind string) bool {
	for _, w := range info.GetWaits() {
		if w.GetVerdict() != verdict {
			continue
		}
		if kind == "" {
			return true
		}
		for _, f := range w.GetFiles() {
			if f.GetVerdict() == verdict && f.GetKind() == kind {
				return true
			}
		}
	}
	return false
}

// silentServer listens on the host's loopback, reads what each client
// sends and never answers; it returns the port.
func silentServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// answersScript asks its terminal for the cursor position with nobody
// attached, waits for a key, then asks for the status with a client
// attached and reads one byte: the client's, if the daemon has stopped
// answering as it must.
const answersScript = `stty raw -echo
printf 'abc\033[6n'
a=$(dd bs=1 count=6 2>/dev/null | od -An -c | tr -d ' \n')
printf '\r\nfirst:%s\r\n' "$a"
dd bs=1 count=1 >/dev/null 2>&1
printf '\033[5n'; printf 'SENT\r\n'
b=$(dd bs=1 count=1 2>/dev/null | od -An -c | tr -d ' \n')
printf 'second:%s\r\n' "$b"
`

// TestTerminalAnswersWhileDetached: the daemon answers a PTY session's
// terminal queries while no client is attached (a cursor position report
// with the true position), and stops once an interactive client is, whose
// terminal answers for itself.
func TestTerminalAnswersWhileDetached(t *testing.T) {
	requireDaemon(t)
	f := newFixture(t)
	r := sandboxctl(t, f.dir, "run", "--detach", "--tty", "--", "sh", "-c", answersScript)
	if r.code != 0 {
		t.Fatalf("run --detach --tty: exit %d, stderr %q", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	t.Cleanup(func() { sandboxctl(t, f.dir, "kill", id) })
	screen := waitScreen(t, id, "first:")
	if !strings.Contains(screen, `first:033[1;4R`) {
		t.Fatalf("the cursor position report, answered by the daemon, should say row 1 column 4:\n%s", screen)
	}
	inR, inW := newPipe(t)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	attached := make(chan struct{})
	var attachRes *client.Result
	var attachErr error
	go func() {
		defer close(attached)
		attachRes, attachErr = suite.client.Attach(ctx, client.AttachOptions{ID: id, Stdin: inR, Stdout: out})
	}()
	// A wait that runs out says whether the attach was still on, and
	// what it had been sent.
	attach := func() string {
		select {
		case <-attached:
			if attachErr != nil {
				return fmt.Sprintf("the attach ended: %v; it got %q", attachErr, out.String())
			}
			return fmt.Sprintf("the attach ended (exit %v, detached %v); it got %q", attachRes.Exit, attachRes.Detached, out.String())
		default:
			return fmt.Sprintf("the attach is on; it got %q", out.String())
		}
	}
	t.Cleanup(func() {
		cancel()
		<-attached
	})
	// The attach holds the input once its first key is through.
	io.WriteString(inW, "g")
	waitScreenExplained(t, id, "SENT", attach)
	io.WriteString(inW, "x")
	if screen := waitScreenExplained(t, id, "second:", attach); !strings.Contains(screen, "second:x") {
		t.Fatalf("with an interactive client attached, the program read something other than the client's key:\n%s", screen)
	}
}

// pyRetry works for a fifth of a second, shows it is alive, then waits
// 0.3 s on a timer, over and over: a program retrying a call that fails
// with a spinner on its screen, as an agent CLI does while its model is
// out of reach. Its output keeps the daemon checking its state at the
// fastest rate.
const pyRetry = `import sys, time
while True:
    end = time.monotonic() + 0.2
    while time.monotonic() < end:
        pass
    sys.stdout.write(".")
    sys.stdout.flush()
    time.sleep(0.3)
`

// TestStatesHoldOverTime watches two sessions for a few seconds, on the
// exec and PTY paths:
//   - one alternating between work and a timer due soon (pyRetry) moves
//     between RUNNING and WAITING at most once a second (the daemon's
//     dwell), not at every turn: each move is an event to every watcher
//     and a line of the audit trail. Without the dwell it moves up to
//     four times a second.
//   - one waiting for its input with a timer due every 200ms all along
//     (pyAsyncio TICK) stays WAITING: it is never told waiting-for-input
//     once the daemon checks it less often than the timer is confirmed.
func TestStatesHoldOverTime(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("python3 is not installed in /usr/bin")
	}
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			requireDaemon(t)
			retry, _ := startWaiting(t, commandStart(tty, nil, nil, python, "-c", pyRetry))
			tick, _ := startWaiting(t, commandStart(tty, nil, nil, python, "-c", pyAsyncio, "TICK"))
			waitState(t, retry, sandboxdv1.State_WAITING)
			waitState(t, tick, sandboxdv1.State_WAITING)

			ctx, cancel := context.WithCancel(context.Background())
			var mu sync.Mutex
			moves := map[string][]string{}
			done := make(chan error, 1)
			go func() {
				done <- suite.client.Watch(ctx, &sandboxdv1.WatchRequest{}, func(ev *sandboxdv1.Event) error {
					if ch := ev.GetState(); ch != nil && !ev.GetSnapshot() {
						mu.Lock()
						moves[ev.GetSessionId()] = append(moves[ev.GetSessionId()], fmt.Sprintf("%s %v->%v", ev.GetTime().AsTime().Format("05.000"), ch.GetFrom(), ch.GetTo()))
						mu.Unlock()
					}
					return nil
				})
			}()
			const watched = 6 * time.Second
			time.Sleep(watched)
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("watch: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			// One move a second, and one more for a watch started just
			// after a move.
			if limit := int(watched/time.Second) + 1; len(moves[retry]) > limit {
				t.Errorf("retrying: %d state changes in %v, more than %d:\n%s", len(moves[retry]), watched, limit, strings.Join(moves[retry], "\n"))
			}
			if len(moves[tick]) > 0 {
				t.Errorf("with a timer due soon all along: state changes in %v, want none:\n%s", watched, strings.Join(moves[tick], "\n"))
			}
		})
	}
}
