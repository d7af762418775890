package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// eventLog collects the events of a Watch started before the sessions it
// is about.
type eventLog struct {
	mu     sync.Mutex
	events []*sandboxdv1.Event
	cancel context.CancelFunc
	done   chan error
}

func watchAll(t *testing.T) *eventLog {
	t.Helper()
	requireDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	l := &eventLog{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		l.done <- suite.client.Watch(ctx, &sandboxdv1.WatchRequest{}, func(ev *sandboxdv1.Event) error {
			l.mu.Lock()
			l.events = append(l.events, ev)
			l.mu.Unlock()
			return nil
		})
	}()
	// The stream is established once the daemon answers anything; a
	// session of our own makes sure of that without a snapshot to wait
	// for.
	go func() {
		for ctx.Err() == nil {
			l.mu.Lock()
			n := len(l.events)
			l.mu.Unlock()
			if n > 0 {
				once.Do(func() { close(ready) })
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// The stream may be set up only after a marker session has come and
	// gone: another one, until one is seen.
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		marker := run(t, commandStart(false, nil, nil, trueCmd), nil)
		if marker.err != nil {
			t.Fatalf("marker session: %v", marker.err)
		}
		select {
		case <-ready:
			done = true
		case err := <-l.done:
			t.Fatalf("watch ended: %v", err)
		case <-deadline:
			t.Fatal("watch delivered nothing within 20s")
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// of returns the events of session id so far.
func (l *eventLog) of(id string) []*sandboxdv1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*sandboxdv1.Event
	for _, ev := range l.events {
		if ev.GetSessionId() == id {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits until match holds for session id's events.
func (l *eventLog) waitFor(t *testing.T, id, what string, match func([]*sandboxdv1.Event) bool) []*sandboxdv1.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs := l.of(id)
		if match(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: no %s within 20s; events:\n%s", id, what, describe(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(evs []*sandboxdv1.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		j, _ := json.Marshal(client.Record(ev))
		fmt.Fprintf(&b, "  %s\n", j)
	}
	return b.String()
}

// states is the sequence of states session events moved to.
func states(evs []*sandboxdv1.Event) []sandboxdv1.State {
	var out []sandboxdv1.State
	for _, ev := range evs {
		if st := ev.GetState(); st != nil && !ev.GetSnapshot() {
			out = append(out, st.GetTo())
		}
	}
	return out
}

// inOrder says whether want occurs in got in this order, other states
// allowed in between.
func inOrder(got, want []sandboxdv1.State) bool {
	i := 0
	for _, s := range got {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestWaitingForInput: a session blocked reading its terminal (PTY) or
// its stdin (pipes) is waiting-for-input, by the kernel's view of the
// reader, and running again once it has its line; every transition is an
// event, in order, on a Watch started before the session.
func TestWaitingForInput(t *testing.T) {
	outcomeHere(t)
	if runtime.GOOS != "linux" {
		t.Skip("linux only: input-wait detection reads /proc; there is no darwin port yet")
	}
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			testWaitingForInput(t, tty)
		})
	}
}

func pathName(tty bool) string {
	if tty {
		return "pty"
	}
	return "exec"
}

func testWaitingForInput(t *testing.T, tty bool) {
	events := watchAll(t)
	inR, inW := newPipe(t)
	// A busy loop between the reads: running must not be mistaken for
	// waiting just because nothing is printed.
	script := `read x; echo "got $x"; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; read y; echo "got $y"`
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	out := &syncBuffer{}
	ids := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		res, err := suite.client.Run(ctx, client.RunOptions{
			Start: commandStart(tty, nil, nil, "/bin/sh", "-c", script), Stdin: inR, Stdout: out, Stderr: out,
			OnStarted: func(id string) { ids <- id },
		})
		if err == nil && res.Exit.GetExitCode() != 0 {
			err = fmt.Errorf("exit %v code %d", res.Exit.GetState(), res.Exit.GetExitCode())
		}
		done <- err
	}()
	var id string
	select {
	case id = <-ids:
	case err := <-done:
		t.Fatalf("session ended before it started: %v", err)
	}
	waiting := func(evs []*sandboxdv1.Event) bool {
		st := states(evs)
		return len(st) > 0 && st[len(st)-1] == sandboxdv1.State_WAITING_FOR_INPUT
	}
	events.waitFor(t, id, "waiting-for-input before the first line", waiting)
	if got := sandboxctlInspectState(t, id); got != "waiting-for-input" {
		t.Errorf("sandboxctl inspect state %q, want waiting-for-input", got)
	}
	fmt.Fprintln(inW, "one")
	events.waitFor(t, id, "running after the first line", func(evs []*sandboxdv1.Event) bool {
		return inOrder(states(evs), []sandboxdv1.State{sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_RUNNING})
	})
	events.waitFor(t, id, "waiting-for-input again at the second read", func(evs []*sandboxdv1.Event) bool {
		return inOrder(states(evs), []sandboxdv1.State{sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT})
	})
	fmt.Fprintln(inW, "two")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("session: %v\noutput: %q", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("session did not end; output %q", out.String())
	}
	evs := events.waitFor(t, id, "exited", func(evs []*sandboxdv1.Event) bool {
		st := states(evs)
		return len(st) > 0 && st[len(st)-1] == sandboxdv1.State_EXITED
	})
	// The last read may return and the shell exit between two looks at
	// it: WAITING_FOR_INPUT may move to EXITED directly.
	want := []sandboxdv1.State{sandboxdv1.State_STARTING, sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT,
		sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_EXITED}
	if got := states(evs); !inOrder(got, want) || got[0] != sandboxdv1.State_STARTING {
		t.Errorf("states %v, want %v in order", got, want)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].GetSeq() <= evs[i-1].GetSeq() {
			t.Errorf("event %d has seq %d after %d", i, evs[i].GetSeq(), evs[i-1].GetSeq())
		}
	}
	if !strings.Contains(out.String(), "got one") || !strings.Contains(out.String(), "got two") {
		t.Errorf("output %q", out.String())
	}
}

// sandboxctlInspectState is the state `sandboxctl inspect` prints.
func sandboxctlInspectState(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command(suite.sandboxctl, "--socket", suite.daemon.socket, "inspect", id).Output()
	if err != nil {
		t.Fatalf("sandboxctl inspect %s: %v", id, err)
	}
	var info struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("sandboxctl inspect %s: %v\n%s", id, err, out)
	}
	return info.State
}

// denialCase is a command whose attempt the sandbox refuses, and the
// denial that must be recorded for it.
type denialCase struct {
	name   string
	policy *sandboxdv1.Policy
	argv   []string
	want   *sandboxdv1.Denial
}

// TestDenialsAreRecorded: what the sandbox refuses is recorded by the
// daemon from the kernel's report of the attempt (seccomp user
// notification on Linux, Seatbelt's reports in the unified log on macOS),
// with operation, target, process and policy field, and shown by Inspect
// and on the Watch stream, on both paths.
func TestDenialsAreRecorded(t *testing.T) {
	outcomeHere(t)
	if !denialsObserved(t) {
		if slices.Contains(mustObserve, "filesystem.write") {
			t.Fatal("the daemon does not observe filesystem write denials, which it must on every host of this OS")
		}
		t.Skip("this host reports denials as unobservable (seccomp user notification unavailable); the enforcement report says so, checked in TestDenialSourcesAreReported")
	}
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			events := watchAll(t)
			addr, _ := tcpListener(t)
			for _, c := range denialCases(addr) {
				t.Run(c.name, func(t *testing.T) {
					s := run(t, commandStart(tty, c.policy, nil, c.argv...), nil)
					if s.err != nil {
						t.Fatalf("session: %v", s.err)
					}
					id := s.res.SessionID
					want, match := wantDenial(c, s.res)
					info := inspect(t, id)
					for deadline := time.Now().Add(denialLag); !slices.ContainsFunc(info.GetRecentDenials(), match) && time.Now().Before(deadline); {
						time.Sleep(50 * time.Millisecond)
						info = inspect(t, id)
					}
					found := slices.ContainsFunc(info.GetRecentDenials(), match)
					if !found || info.GetDenialCount() < 1 || info.GetDenialCount() < uint64(len(info.GetRecentDenials())) {
						t.Errorf("inspect: count %d, recent %v; want one like %v\noutput: %s", info.GetDenialCount(), info.GetRecentDenials(), want, s)
					}
					evs := events.waitFor(t, id, "the denial and the end", func(evs []*sandboxdv1.Event) bool {
						st := states(evs)
						ended := len(st) > 0 && st[len(st)-1] == sandboxdv1.State_EXITED
						return ended && (denialLag == 0 || slices.ContainsFunc(evs, func(ev *sandboxdv1.Event) bool {
							return ev.GetDenial() != nil && match(ev.GetDenial())
						}))
					})
					var denialAt, endAt int
					for i, ev := range evs {
						if d := ev.GetDenial(); d != nil && match(d) && denialAt == 0 {
							denialAt = i
						}
						if ev.GetState().GetTo() == sandboxdv1.State_EXITED {
							endAt = i
						}
					}
					// A denial that arrives late may follow the end.
					if denialAt == 0 || (denialLag == 0 && denialAt > endAt) {
						t.Errorf("watch: no denial like %v before the end (where denials come late: at all):\n%s", want, describe(evs))
					}
				})
			}
		})
	}
}

// denialsObserved says whether the daemon reports, for a plain session,
// that it observes filesystem write denials.
func denialsObserved(t *testing.T) bool {
	t.Helper()
	s := run(t, commandStart(false, nil, nil, trueCmd), nil)
	if s.err != nil {
		t.Fatalf("session: %v", s.err)
	}
	for _, src := range s.res.Enforcement.GetDenialSources() {
		if src.GetKind() == "filesystem.write" {
			return src.GetObserved()
		}
	}
	t.Fatalf("enforcement report has no denial source for filesystem.write: %v", s.res.Enforcement.GetDenialSources())
	return false
}

// TestDenialSourcesAreReported: every session's enforcement report says,
// for each kind of denial, whether it is observed here, and how or why
// not, so that an empty denial list is never mistaken for "nothing was
// refused".
func TestDenialSourcesAreReported(t *testing.T) {
	outcomeHere(t)
	s := run(t, commandStart(false, netPolicy(sandboxdv1.Network_NONE), nil, trueCmd), nil)
	if s.err != nil {
		t.Fatalf("session: %v", s.err)
	}
	kinds := map[string]*sandboxdv1.DenialSource{}
	for _, src := range s.res.Enforcement.GetDenialSources() {
		kinds[src.GetKind()] = src
	}
	for _, k := range []string{"filesystem.write", "filesystem.read", "network.mode", "process"} {
		src := kinds[k]
		if src == nil || src.GetHow() == "" {
			t.Errorf("denial source %q missing or unexplained: %v", k, src)
		}
	}
	for _, k := range mustObserve {
		if !kinds[k].GetObserved() {
			t.Errorf("denial source %q is not observed, which it must be on every host of this OS: %v", k, kinds[k])
		}
	}
}

// TestTimeoutIsKilledTimeout: a session past its wall-clock limit ends
// killed, with timeout as the reason, in its Exit, Inspect and events.
func TestTimeoutIsKilledTimeout(t *testing.T) {
	outcomeHere(t)
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			events := watchAll(t)
			pol := &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(500 * time.Millisecond)}}
			s := run(t, commandStart(tty, pol, nil, holdArgv()...), nil)
			// Refused on macOS: the daemon cannot find every process of a
			// sandbox to end it at its timeout. On Windows every PTY
			// session is refused (the shared list's PTY cases).
			refusedFor := map[string]string{"darwin": "limits.timeout"}[runtime.GOOS]
			if tty && runtime.GOOS == "windows" {
				refusedFor = "process"
			}
			if refusedFor != "" {
				if u := client.UnenforceableFrom(s.err); u == nil || u.GetField() != refusedFor || u.GetRemedy() == "" {
					t.Fatalf("want %s refused with a remedy, got %v", refusedFor, s.err)
				}
				return
			}
			if s.err != nil {
				t.Fatalf("session: %v", s.err)
			}
			if e := s.res.Exit; e.GetState() != sandboxdv1.State_KILLED || e.GetReason() != "timeout" {
				t.Errorf("exit %v", e)
			}
			id := s.res.SessionID
			if info := inspect(t, id); info.GetState() != sandboxdv1.State_KILLED || info.GetReason() != "timeout" {
				t.Errorf("inspect: %v %q", info.GetState(), info.GetReason())
			}
			events.waitFor(t, id, "killed(timeout)", func(evs []*sandboxdv1.Event) bool {
				for _, ev := range evs {
					if st := ev.GetState(); st.GetTo() == sandboxdv1.State_KILLED && st.GetReason() == "timeout" {
						return true
					}
				}
				return false
			})
		})
	}
}

// TestWatchFollowsASubtree: a watch of one session gets its children's
// events too (they name it as parent), and nothing of other sessions.
func TestWatchFollowsASubtree(t *testing.T) {
	outcomeHere(t)
	requireDaemon(t)
	f := newFixture(t)
	write := f.mkdir("work")
	script := suite.sandboxctl + ` run -- /bin/sh -c 'echo x > /etc/child-blocked'; echo parent-done`
	pol := supervisorPolicy(write)
	parent, err := startDetached(t, commandStart(false, pol, nil, "/bin/sh", "-c", "read go; "+script))
	if childrenRefused(t, err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	other, err := startDetached(t, commandStart(false, nil, nil, "/bin/sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	var mu sync.Mutex
	var got []*sandboxdv1.Event
	var parentEnded, childDenied bool
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- suite.client.Watch(ctx, &sandboxdv1.WatchRequest{SessionId: parent}, func(ev *sandboxdv1.Event) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev)
			parentEnded = parentEnded || (ev.GetSessionId() == parent && ended(ev))
			childDenied = childDenied || sameTarget(ev.GetDenial().GetTarget(), "/etc/child-blocked")
			// A denial that arrives late may follow the parent's end.
			if parentEnded && (denialLag == 0 || childDenied) {
				cancel()
			}
			return nil
		})
	}()
	// The parent reads a line before it starts its child, so the watch
	// is in place first: its snapshot shows the parent.
	waitSnapshot := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 || time.Now().After(waitSnapshot) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	goR, goW := newPipe(t)
	fmt.Fprintln(goW, "go")
	go attachFor(t, parent, false, goR, 30*time.Second)
	select {
	case <-watchDone:
	case <-time.After(30*time.Second + denialLag):
		mu.Lock()
		sawEnd := parentEnded
		mu.Unlock()
		if !sawEnd {
			t.Fatal("watch of the parent did not see it end")
		}
		cancel()
		<-watchDone
	}
	mu.Lock()
	defer mu.Unlock()
	var child string
	for _, ev := range got {
		switch {
		case ev.GetSessionId() == other:
			t.Errorf("event of an unrelated session: %v", ev)
		case ev.GetParentId() == parent:
			child = ev.GetSessionId()
		}
	}
	if child == "" {
		t.Fatalf("no event of the parent's child:\n%s", describe(got))
	}
	sawChildDenial, sawChildEnd := false, false
	for _, ev := range got {
		if ev.GetSessionId() != child {
			continue
		}
		sawChildDenial = sawChildDenial || sameTarget(ev.GetDenial().GetTarget(), "/etc/child-blocked")
		sawChildEnd = sawChildEnd || ended(ev)
	}
	if !sawChildEnd || (!sawChildDenial && denialsObserved(t)) {
		t.Errorf("child %s: end %v, denial %v:\n%s", child, sawChildEnd, sawChildDenial, describe(got))
	}
}

func ended(ev *sandboxdv1.Event) bool {
	switch ev.GetState().GetTo() {
	case sandboxdv1.State_EXITED, sandboxdv1.State_KILLED, sandboxdv1.State_FAILED_TO_START:
		return !ev.GetSnapshot()
	}
	return false
}
