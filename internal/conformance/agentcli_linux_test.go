package conformance

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// agentTimeout bounds each wait on the agent CLI: its start-up under
// network none includes name lookups that each run to their timeout.
const agentTimeout = 90 * time.Second

// TestAgentCLIHeadless runs a real agent CLI (@openai/codex, from the npm
// registry) as a supervisor would: in a detached PTY session under network
// none, with its state directory as its one write root, and nobody
// attached. The daemon answers the terminal's queries it sends at
// start-up, so it draws its prompt, which sandboxctl screen shows; it is
// then waiting-for-input. Typed into through an attach, it takes the
// prompt; while its model call fails and is retried, and between the
// attempts while it waits out its backoff (seconds, a timer of its event
// loop, after its name lookups waited on the network), it is not
// waiting-for-input: it goes on by itself. On the landlock set it runs as
// that set's users must run it (temporary files in its write root, no
// background server under /tmp) and its refused model call is a recorded
// denial.
func TestAgentCLIHeadless(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the agent CLI is installed from the npm registry")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the agent CLI's launcher is a node program")
	}
	requireDaemon(t)
	f := newFixture(t)
	prefix := f.path("npm")
	npmInstall(t, npm, prefix, "@openai/codex")
	codex := filepath.Join(prefix, "node_modules", ".bin", "codex")
	home := f.mkdir("home")
	state := f.mkdir("home/.codex")
	work := f.mkdir("work")
	env := map[string]string{"HOME": home}
	args := []string{"--env", "HOME=" + home}
	var codexArgs []string
	landlockSet := suite.mechanism == "landlock" || !linuxHost.namespaces
	if landlockSet {
		// The landlock set has no private /tmp: codex is run as a user
		// of that set must run it, with its temporary files (sqlite's)
		// in its write root and without its background server, which
		// makes its socket under /tmp. Otherwise it ends at start-up,
		// its writes to /var/tmp and /tmp recorded as denials.
		tmp := f.mkdir("home/.codex/tmp")
		env["TMPDIR"] = tmp
		args = append(args, "--env", "TMPDIR="+tmp)
		codexArgs = []string{"--no-daemon"}
	}
	p := fsPolicy(list(state), nil, nil)

	// An API key, as a user gives it, so that the prompt is the chat's
	// and what is typed there becomes a model call.
	login := commandStart(false, p, env, codex, "login", "--with-api-key")
	login.Command.Cwd = work
	if s := run(t, login, strings.NewReader("sk-sandboxd-test\n")); s.exitCode() != 0 {
		t.Fatalf("codex login: %s", s)
	}

	run := append([]string{"run", "--detach", "--tty", "--write", state}, args...)
	run = append(append(run, "--", codex), codexArgs...)
	r := sandboxctl(t, work, run...)
	if r.code != 0 {
		t.Fatalf("sandboxctl run --detach --tty codex: exit %d, stderr %q", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	t.Cleanup(func() { sandboxctl(t, work, "kill", id) })

	prompt := waitScreen(t, id, "Ask Codex to do anything")
	t.Logf("codex's first screen, headless:\n%s", prompt)
	if got := sandboxctl(t, work, "screen", id); got.code != 0 || !strings.Contains(got.stdout, "Ask Codex to do anything") {
		t.Errorf("sandboxctl screen: exit %d, stdout %q, stderr %q; want codex's prompt", got.code, got.stdout, got.stderr)
	}
	info := waitStateWithin(t, id, sandboxdv1.State_WAITING_FOR_INPUT, agentTimeout)
	if !hasEvidence(info, "input", "terminal") {
		t.Errorf("waiting-for-input without a task reading the terminal: %v", info.GetWaits())
	}

	// Typed into through an attach, as a person at a terminal would.
	inR, inW := newPipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	attached := make(chan struct{})
	go func() {
		defer close(attached)
		suite.client.Attach(ctx, client.AttachOptions{ID: id, Stdin: inR, Stdout: io.Discard})
	}()
	t.Cleanup(func() {
		cancel()
		<-attached
	})
	// The text and the Enter apart: a burst of both at once reads as a
	// paste, whose line ends are the composer's own.
	io.WriteString(inW, "hello sandbox")
	waitScreen(t, id, "hello sandbox")
	io.WriteString(inW, "\r")
	turn := waitScreen(t, id, "esc to interrupt")
	t.Logf("codex at work, its model out of reach:\n%s", turn)

	if landlockSet {
		// Without a network namespace its model call is refused at
		// socket(), which the session records. Refused at once, it never
		// waits on the network, so the backoff of seconds it then waits
		// out is not told from a timer of its own (inputwait.Backoff), and
		// the session may be told waiting-for-input meanwhile.
		deadline := time.Now().Add(agentTimeout)
		for {
			info := inspect(t, id)
			if slices.ContainsFunc(info.GetRecentDenials(), func(d *sandboxdv1.Denial) bool {
				return d.GetField() == "network.mode" && d.GetOperation() == "socket"
			}) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("codex's model call is not recorded as refused by network.mode: %v", info.GetRecentDenials())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The state is what the daemon's last check found, and the screen
	// shows the turn before a check has seen it (one comes within 50 ms
	// of the output that drew it): the turn begins for the state once it
	// has left waiting-for-input.
	for deadline := time.Now().Add(agentTimeout); inspect(t, id).GetState() == sandboxdv1.State_WAITING_FOR_INPUT; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting-for-input %v after its turn began:\n%s", agentTimeout, sessionReport(id))
		}
	}

	// While the turn lasts (its failed model call retried, with backoffs
	// of seconds between the attempts), the session is never
	// waiting-for-input.
	var seen []sandboxdv1.State
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		info := inspect(t, id)
		if !strings.Contains(screenText(t, id), "esc to interrupt") {
			break
		}
		seen = append(seen, info.GetState())
		if info.GetState() == sandboxdv1.State_WAITING_FOR_INPUT {
			// The waits are a walk taken as Inspect answered, after the
			// check that set the state: they show what the tasks wait on
			// now, which may no longer be what that check saw.
			t.Fatalf("waiting-for-input while its model call is retried (states so far %v); what its tasks wait on now: %v\nscreen:\n%s", seen, info.GetWaits(), screenText(t, id))
		}
	}
	if len(seen) == 0 {
		t.Fatal("the turn ended before its state could be seen")
	}
	t.Logf("states during the turn: %v", seen)
}

// screenText is what session id's terminal shows.
func screenText(t *testing.T, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	scr, err := suite.client.Screen(ctx, id)
	if err != nil {
		t.Fatalf("screen %s: %v", id, err)
	}
	return strings.Join(scr.GetLines(), "\n")
}

// waitScreen waits until session id's screen shows want, and returns it.
func waitScreen(t *testing.T, id, want string) string {
	t.Helper()
	return waitScreenExplained(t, id, want, nil)
}

// waitScreenExplained is waitScreen whose failure also says what explain
// returns: what the test's own clients saw.
func waitScreenExplained(t *testing.T, id, want string, explain func() string) string {
	t.Helper()
	deadline := time.Now().Add(agentTimeout)
	for {
		text := screenText(t, id)
		if strings.Contains(text, want) {
			return text
		}
		if time.Now().After(deadline) {
			var more string
			if explain != nil {
				more = explain() + "\n"
			}
			t.Fatalf("the screen of %s does not show %q:\n%s\n%s%s", id, want, text, more, sessionReport(id))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessionReport says what session id is doing, for the message of a wait
// that ran out: its state, what each of its tasks waits on (with its
// kernel stack where the test may read it), its denials and the tail of
// the daemon's log. Such a wait is either a program that never got what
// it waited for or a daemon that lost it; the report tells which.
func sessionReport(id string) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := suite.client.Inspect(ctx, id)
	if err != nil {
		fmt.Fprintf(&b, "inspect %s: %v\n", id, err)
	} else {
		fmt.Fprintf(&b, "session %s: %v %s, pid %d, %d viewers, %d denials\n", id, info.GetState(), info.GetReason(), info.GetPid(), info.GetViewers(), info.GetDenialCount())
		for _, w := range info.GetWaits() {
			fmt.Fprintf(&b, "  task %d/%d %s: %s, %s\n", w.GetPid(), w.GetTid(), w.GetCommand(), w.GetSyscall(), w.GetVerdict())
			for _, f := range w.GetFiles() {
				fmt.Fprintf(&b, "    fd %d %s %s: %s\n", f.GetFd(), f.GetKind(), f.GetDetail(), f.GetVerdict())
			}
			if stack, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stack", w.GetPid(), w.GetTid())); err == nil {
				fmt.Fprintf(&b, "    kernel stack:\n%s", indent(string(stack), "      "))
			}
		}
		for _, d := range info.GetRecentDenials() {
			fmt.Fprintf(&b, "  denial: %s %s %s (pid %d)\n", d.GetField(), d.GetOperation(), d.GetTarget(), d.GetPid())
		}
	}
	b.WriteString(daemonThreads())
	fmt.Fprintf(&b, "daemon log tail:\n%s", suite.daemon.logTail())
	return b.String()
}

// daemonThreads gives the kernel stack of each of the daemon's threads
// that is in a system call other than the Go runtime's idle waits: a
// thread answering the sandbox's seccomp notifications that is stuck
// shows there. Empty where the test may not read the stacks.
func daemonThreads() string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", suite.daemon.cmd.Process.Pid))
	for _, task := range tasks {
		stack, err := os.ReadFile(task + "/stack")
		if err != nil {
			return ""
		}
		wchan, _ := os.ReadFile(task + "/wchan")
		switch string(wchan) {
		case "0", "futex_do_wait", "futex_wait_queue", "do_epoll_wait", "ep_poll":
			continue
		}
		fmt.Fprintf(&b, "daemon thread %s in %s:\n%s", filepath.Base(task), wchan, indent(string(stack), "  "))
	}
	return b.String()
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

func waitStateWithin(t *testing.T, id string, want sandboxdv1.State, limit time.Duration) *sandboxdv1.SessionInfo {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		info := inspect(t, id)
		if info.GetState() == want {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s is %v, want %v; evidence: %v", id, info.GetState(), want, info.GetWaits())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
