package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// supervisorPolicy may start children; it writes only write and has no
// network.
func supervisorPolicy(write string) *sandboxdv1.Policy {
	p := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{write}},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
		Limits:     &sandboxdv1.Limits{Timeout: durationpb.New(2 * time.Minute)},
		Children:   &sandboxdv1.Children{Allow: true},
	}
	if runtime.GOOS == "darwin" {
		// macOS refuses limits.timeout; the suite's own deadline bounds
		// the session there.
		p.Limits = nil
	}
	return p
}

// childrenRefused handles a Linux host where only the landlock set works:
// it has no mount namespace to give a session socket its path and hide the
// others', so children.allow must be refused, with its field.
func childrenRefused(t *testing.T, err error) bool {
	t.Helper()
	u := client.UnenforceableFrom(err)
	if u == nil || !refusalsAllowed() {
		return false
	}
	if u.GetField() != "children.allow" && suite.mechanism == "landlock" {
		t.Fatalf("refused for %s, want children.allow: %v", u.GetField(), err)
	}
	t.Logf("refused, as this host allows: %s: %s", u.GetField(), u.GetRemedy())
	return true
}

// sections splits a script's output at its "== NAME" lines.
func sections(out string) map[string]string {
	m := map[string]string{}
	name := ""
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		if n, ok := strings.CutPrefix(line, "== "); ok {
			name = strings.TrimSpace(n)
			continue
		}
		m[name] += line + "\n"
	}
	return m
}

// rcOf is the "rc=N" a section's script printed last.
func rcOf(section string) int {
	i := strings.LastIndex(section, "rc=")
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(section[i+3:], "\n", 2)[0]))
	if err != nil {
		return -1
	}
	return n
}

// envOf reads KEY from the environment an env probe step printed.
func envOf(o outcome, key string) string {
	list, _ := o.Detail.([]any)
	for _, kv := range list {
		s, _ := kv.(string)
		if v, ok := strings.CutPrefix(s, key+"="); ok {
			return v
		}
	}
	return ""
}

func findOp(list []outcome, op string) (outcome, bool) {
	i := slices.IndexFunc(list, func(o outcome) bool { return o.Op == op })
	if i < 0 {
		return outcome{}, false
	}
	return list[i], true
}

// hostSessionSocket is where the suite's daemon makes session id's socket.
func hostSessionSocket(id string) string {
	return filepath.Join(filepath.Dir(suite.daemon.socket), "sandboxd-sessions", id+".sock")
}

// startDetached starts a detached session from the host and returns its id.
func startDetached(t *testing.T, start *sandboxdv1.Start) (string, error) {
	t.Helper()
	start.Detach = true
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	res, err := suite.client.Run(ctx, client.RunOptions{Start: start})
	if err != nil {
		return "", err
	}
	id := res.SessionID
	t.Cleanup(func() { _ = suite.client.Kill(context.Background(), id, 0) })
	return id, nil
}

func inspect(t *testing.T, id string) *sandboxdv1.SessionInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := suite.client.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return info
}

func waitState(t *testing.T, id string, want sandboxdv1.State) *sandboxdv1.SessionInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info := inspect(t, id)
		if info.GetState() == want {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s is %v, want %v", id, info.GetState(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChildSandboxes runs a supervisor sandbox that uses sandboxctl, with
// no flags, against its own session socket, on both paths.
func TestChildSandboxes(t *testing.T) {
	outcomeHere(t)
	for _, tty := range []bool{false, true} {
		t.Run(map[bool]string{false: "exec", true: "pty"}[tty], func(t *testing.T) {
			testChildSandboxes(t, tty)
		})
	}
}

func testChildSandboxes(t *testing.T, tty bool) {
	f := newFixture(t)
	work := f.mkdir("work")
	sub := f.mkdir("work/sub")
	outside := f.mkdir("outside")
	addr, token := tcpListener(t)

	// Another session whose socket the supervisor must not reach.
	other, err := startDetached(t, commandStart(false, supervisorPolicy(f.mkdir("other")), nil, "/bin/sleep", "60"))
	if childrenRefused(t, err) {
		return
	}
	if err != nil {
		t.Fatalf("start the other session: %v", err)
	}
	otherSocket := hostSessionSocket(other)
	if _, err := os.Stat(otherSocket); err != nil {
		t.Fatalf("the other session's socket: %v", err)
	}

	script := fmt.Sprintf(`ctl=%[1]s; probe=%[2]s
echo "== self"; $probe env
echo "== widen-network"; $ctl run --network host -- $probe tcp-connect %[3]s 2>&1; echo "rc=$?"
echo "== inherit"; $ctl run -- $probe tcp-connect %[3]s env 2>&1; echo "rc=$?"
echo "== widen-write"; $ctl run --write %[4]s -- %[10]s 2>&1; echo "rc=$?"
echo "== narrow-write"; $ctl run --write %[5]s -- $probe write %[5]s/a write %[6]s/b 2>&1; echo "rc=$?"
echo "== widen-through-link"; ln -s %[4]s %[6]s/l && $ctl run --write %[6]s/l -- $probe write %[6]s/l/linked 2>&1; echo "rc=$?"
echo "== grandchild"; $ctl run -- $ctl run -- $probe env 2>&1; echo "rc=$?"
echo "== grandchild-widens"; $ctl run --write %[5]s -- $ctl run --write %[6]s -- %[10]s 2>&1; echo "rc=$?"
echo "== main-socket"; $probe unix-connect %[7]s
echo "== other-socket"; $probe unix-connect %[8]s
echo "== ps"; $ctl ps -a 2>&1; echo "rc=$?"
echo "== inspect-other"; $ctl inspect %[9]s 2>&1; echo "rc=$?"
echo "== kill-other"; $ctl kill %[9]s 2>&1; echo "rc=$?"
echo "== bad-request"; $ctl run --env SANDBOXD_SOCKET=/elsewhere -- %[10]s 2>&1; echo "rc=$?"
echo "== end"
`, suite.sandboxctl, suite.probe, addr, outside, sub, work, suite.daemon.socket, otherSocket, other, trueCmd)
	s := run(t, commandStart(tty, supervisorPolicy(work), nil, "/bin/sh", "-c", script), nil)
	if childrenRefused(t, s.err) {
		return
	}
	exitedCleanly(t, s)
	sec := sections(s.stdout + s.stderr)
	if _, ok := sec["end"]; !ok {
		t.Fatalf("the supervisor script did not finish:\n%s", s)
	}
	parentID, digest := s.res.SessionID, s.res.Digest

	self, ok := findOp(parseOutcomes(sec["self"]), "env")
	if !ok {
		t.Fatalf("no env from the supervisor: %q", sec["self"])
	}
	if got, want := envOf(self, "SANDBOXD_SOCKET"), sessionSocketIn(parentID); got != want {
		t.Errorf("SANDBOXD_SOCKET=%q, want %q", got, want)
	}
	if envOf(self, "SANDBOXD_SESSION") != parentID || envOf(self, "SANDBOXD_POLICY_DIGEST") != digest {
		t.Errorf("supervisor's environment says session %q digest %q; Started said %q %q", envOf(self, "SANDBOXD_SESSION"), envOf(self, "SANDBOXD_POLICY_DIGEST"), parentID, digest)
	}

	wantRefused := func(name, field string) {
		t.Helper()
		if rc := rcOf(sec[name]); rc != client.ExitDaemonFailed || !strings.Contains(sec[name], field) {
			t.Errorf("%s: exit %d, want %d naming %s; output %q", name, rc, client.ExitDaemonFailed, field, sec[name])
		}
		if strings.Contains(sec[name], token) {
			t.Errorf("%s: a refused child reached the host: %q", name, sec[name])
		}
	}
	wantRefused("widen-network", "network.mode")
	wantRefused("widen-write", "filesystem.write")
	wantRefused("grandchild-widens", "filesystem.write")
	// A write root inside the parent's, as written, that a link the
	// parent made leads out of: the child would write where the parent
	// may not.
	wantRefused("widen-through-link", "filesystem.write")
	absent(t, outside+"/linked")

	// The child asked for nothing: it has the parent's policy, and the
	// probe shows network none is what it runs under.
	inherit := parseOutcomes(sec["inherit"])
	if rcOf(sec["inherit"]) != 0 || len(inherit) != 2 {
		t.Fatalf("inherit: %q", sec["inherit"])
	}
	if inherit[0].OK || strings.Contains(sec["inherit"], token) {
		t.Errorf("a child of a network-none parent reached the host: %v", inherit[0])
	}
	childID := envOf(inherit[1], "SANDBOXD_SESSION")
	if childID == "" || childID == parentID {
		t.Errorf("child's environment: session %q, want a new session", childID)
	}
	parentInfo := inspect(t, parentID)
	info := inspect(t, childID)
	if info.GetParentId() != parentID || info.GetPolicy().GetNetwork().GetMode() != sandboxdv1.Network_NONE {
		t.Errorf("Inspect of the child: parent %q network %v", info.GetParentId(), info.GetPolicy().GetNetwork().GetMode())
	}
	inheritsPolicy(t, "child", parentInfo, info, envOf(inherit[1], "SANDBOXD_POLICY_DIGEST"))

	nw := parseOutcomes(sec["narrow-write"])
	if rcOf(sec["narrow-write"]) != 0 || len(nw) != 2 || !nw[0].OK || nw[1].OK {
		t.Errorf("a child narrowed to %s must write there and not in %s: %q", sub, work, sec["narrow-write"])
	}
	absent(t, work+"/b")

	g, ok := findOp(parseOutcomes(sec["grandchild"]), "env")
	if !ok || rcOf(sec["grandchild"]) != 0 {
		t.Fatalf("grandchild: %q", sec["grandchild"])
	}
	gid := envOf(g, "SANDBOXD_SESSION")
	gi := inspect(t, gid)
	inheritsPolicy(t, "grandchild", parentInfo, gi, envOf(g, "SANDBOXD_POLICY_DIGEST"))
	if mid := inspect(t, gi.GetParentId()); mid.GetParentId() != parentID {
		t.Errorf("grandchild's parent %s has parent %q, want %s", gi.GetParentId(), mid.GetParentId(), parentID)
	}

	for _, name := range []string{"main-socket", "other-socket"} {
		o, ok := findOp(parseOutcomes(sec[name]), "unix-connect")
		if !ok || o.OK {
			t.Errorf("%s: the supervisor reached it: %q", name, sec[name])
		}
	}
	if ps := sec["ps"]; rcOf(ps) != 0 || !strings.Contains(ps, parentID) || !strings.Contains(ps, childID) || strings.Contains(ps, other) {
		t.Errorf("ps on the session socket must list the subtree only: %q", ps)
	}
	for _, name := range []string{"inspect-other", "kill-other"} {
		if rc := rcOf(sec[name]); rc == 0 || !strings.Contains(strings.ToLower(sec[name]), "not found") {
			t.Errorf("%s: exit %d output %q, want not found", name, rc, sec[name])
		}
	}
	if st := inspect(t, other).GetState(); st != sandboxdv1.State_RUNNING {
		t.Errorf("the other session is %v after the supervisor tried to kill it", st)
	}
	if rc := rcOf(sec["bad-request"]); rc != client.ExitDaemonFailed || !strings.Contains(sec["bad-request"], "SANDBOXD_SOCKET") {
		t.Errorf("bad request on the session socket: exit %d %q", rc, sec["bad-request"])
	}
}

// inheritsPolicy checks that a descendant that asked for nothing runs
// under its ancestor's policy, but for the time, of which it gets what the
// ancestor had left when it started (so its digest differs), and that its
// environment names the digest the daemon recorded for it.
func inheritsPolicy(t *testing.T, what string, ancestor, info *sandboxdv1.SessionInfo, envDigest string) {
	t.Helper()
	if envDigest == "" || envDigest != info.GetPolicyDigest() {
		t.Errorf("%s's environment says digest %q, Inspect %q", what, envDigest, info.GetPolicyDigest())
	}
	got, want := proto.Clone(info.GetPolicy()).(*sandboxdv1.Policy), proto.Clone(ancestor.GetPolicy()).(*sandboxdv1.Policy)
	left, full := got.GetLimits().GetTimeout().AsDuration(), want.GetLimits().GetTimeout().AsDuration()
	if got.GetLimits().GetTimeout() == nil || left <= 0 || left > full {
		t.Errorf("%s's timeout %v, want what is left of its ancestor's %v", what, got.GetLimits().GetTimeout(), full)
	}
	for _, p := range []*sandboxdv1.Policy{got, want} {
		if p.GetLimits() != nil {
			p.Limits.Timeout = nil
		}
	}
	if !proto.Equal(got, want) {
		t.Errorf("%s's policy, timeout aside:\n%v\nwant its ancestor's:\n%v", what, got, want)
	}
}

// TestDetachAttachAndSubtreeKill: a detached supervisor starts a detached
// worker; the host attaches to both (scrollback, two viewers, one of them
// typing), then kills the supervisor and with it the worker.
func TestDetachAttachAndSubtreeKill(t *testing.T) {
	outcomeHere(t)
	for _, tty := range []bool{false, true} {
		t.Run(map[bool]string{false: "exec", true: "pty"}[tty], func(t *testing.T) {
			testDetachAttach(t, tty)
		})
	}
}

func testDetachAttach(t *testing.T, tty bool) {
	f := newFixture(t)
	work := f.mkdir("work")
	marker := "worker-" + randomHex()
	ttyFlag := ""
	if tty {
		ttyFlag = "--tty"
	}
	script := fmt.Sprintf(`w=$(%[1]s run --detach %[2]s -- /bin/sh -c 'echo %[3]s ready; read line; echo %[3]s got $line; exec sleep 60') || exit 1
echo "worker=$w"
exec sleep 60
`, suite.sandboxctl, ttyFlag, marker)
	sup, err := startDetached(t, commandStart(tty, supervisorPolicy(work), nil, "/bin/sh", "-c", script))
	if childrenRefused(t, err) {
		return
	}
	if err != nil {
		t.Fatalf("start the supervisor: %v", err)
	}

	// Attaching replays what the supervisor printed before anyone watched.
	var worker string
	deadline := time.Now().Add(20 * time.Second)
	for worker == "" {
		out := attachFor(t, sup, true, nil, 300*time.Millisecond)
		if _, after, ok := strings.Cut(out, "worker="); ok {
			worker = strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
		}
		if worker == "" && time.Now().After(deadline) {
			t.Fatalf("the supervisor never printed its worker: %q", out)
		}
	}
	wi := inspect(t, worker)
	if wi.GetParentId() != sup || !wi.GetDetached() || wi.GetTty() != tty {
		t.Fatalf("worker: parent %q detached %v tty %v", wi.GetParentId(), wi.GetDetached(), wi.GetTty())
	}

	// Two viewers: one watches, one types.
	watcher := newAttach(t, worker, true, nil)
	in, typing := newPipe(t)
	typist := newAttach(t, worker, false, in)
	watcher.waitOutput(t, marker+" ready")
	typist.waitOutput(t, marker+" ready")
	if v := inspect(t, worker).GetViewers(); v != 2 {
		t.Errorf("worker has %d viewers, want 2", v)
	}
	fmt.Fprintln(typing, "hello")
	watcher.waitOutput(t, marker+" got hello")
	typist.waitOutput(t, marker+" got hello")

	// Kill of the supervisor takes its subtree.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := suite.client.Kill(ctx, sup, 0); err != nil {
		t.Fatalf("kill supervisor: %v", err)
	}
	waitState(t, sup, sandboxdv1.State_KILLED)
	waitState(t, worker, sandboxdv1.State_KILLED)
	watcher.wait(t, 20*time.Second)
	typist.wait(t, 20*time.Second)
	for _, a := range []*background{watcher, typist} {
		if a.err != nil || a.res.Exit.GetState() != sandboxdv1.State_KILLED {
			t.Errorf("a viewer saw %v, %v; want the worker killed", a.res, a.err)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(processesWith(marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("worker processes left after the kill: %v", processesWith(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newAttach attaches to session id in the background.
func newAttach(t *testing.T, id string, readOnly bool, stdin *os.File) *background {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	b := &background{out: &syncBuffer{}, done: make(chan struct{})}
	opts := client.AttachOptions{ID: id, ReadOnly: readOnly, Stdout: b.out, Stderr: b.out}
	if stdin != nil {
		opts.Stdin = stdin
	}
	go func() {
		defer close(b.done)
		defer cancel()
		b.res, b.err = suite.client.Attach(ctx, opts)
	}()
	t.Cleanup(func() {
		cancel()
		<-b.done
	})
	return b
}

// attachFor attaches for a while and returns what it saw.
func attachFor(t *testing.T, id string, readOnly bool, stdin *os.File, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := &syncBuffer{}
	opts := client.AttachOptions{ID: id, ReadOnly: readOnly, Stdout: out, Stderr: out}
	if stdin != nil {
		opts.Stdin = stdin
	}
	_, _ = suite.client.Attach(ctx, opts)
	return out.String()
}

func newPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestCallersSeeTheirOwnSessions: on a root daemon's main socket, an
// ordinary user's ps, inspect and kill reach only that user's sessions,
// while root and the operators group see all. An operator watches and
// kills another's session and controls only its own: no interactive
// attach to another's, no signal but one that ends it.
func TestCallersSeeTheirOwnSessions(t *testing.T) {
	outcomeHere(t)
	if !suite.asRoot {
		t.Skip("needs root to act as two other users; the rootless run has one user")
	}
	const user, operator, socketGroup, operators = 4242, 4343, 4242, 4545
	d, err := startDaemonWith(filepath.Join(suite.root, "authz"), suite.wrap, "--socket-group", strconv.Itoa(socketGroup), "--operators-group", strconv.Itoa(operators))
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	userGroups, operatorGroups, rootGroups := []uint32{socketGroup}, []uint32{socketGroup, operators}, []uint32{0}
	as := func(uid int, groups []uint32, args ...string) cliResult {
		t.Helper()
		return sandboxctlAs(t, credentialOf(uid, groups), d.socket, "/", args...)
	}
	start := func(uid int, groups []uint32, argv ...string) string {
		t.Helper()
		r := as(uid, groups, append([]string{"run", "--detach", "--"}, argv...)...)
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("run --detach as %d: exit %d %q %q", uid, r.code, r.stdout, r.stderr)
		}
		t.Cleanup(func() { as(0, rootGroups, "kill", id) })
		return id
	}
	rootSession := start(0, rootGroups, "/bin/sleep", "60")
	userSession := start(user, userGroups, "/bin/sleep", "60")

	ps := as(user, userGroups, "ps")
	if ps.code != 0 || !strings.Contains(ps.stdout, userSession) || strings.Contains(ps.stdout, rootSession) {
		t.Errorf("uid %d's ps must show its session only: exit %d\n%s%s", user, ps.code, ps.stdout, ps.stderr)
	}
	for _, verb := range []string{"inspect", "kill"} {
		if r := as(user, userGroups, verb, rootSession); r.code == 0 || !strings.Contains(strings.ToLower(r.stderr), "not found") {
			t.Errorf("uid %d %s of root's session: exit %d %q, want not found", user, verb, r.code, r.stderr)
		}
	}
	for name, who := range map[string]struct {
		uid    int
		groups []uint32
	}{"operator": {operator, operatorGroups}, "root": {0, rootGroups}} {
		ps := as(who.uid, who.groups, "ps")
		if ps.code != 0 || !strings.Contains(ps.stdout, userSession) || !strings.Contains(ps.stdout, rootSession) {
			t.Errorf("%s's ps must show every session: exit %d\n%s%s", name, ps.code, ps.stdout, ps.stderr)
		}
	}
	if r := as(operator, operatorGroups, "kill", userSession); r.code != 0 {
		t.Errorf("an operator's kill of another user's session: exit %d %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"attach", "--no-stdin", rootSession}, {"kill", "--signal", "USR1", rootSession}} {
		if r := as(operator, operatorGroups, args...); r.code == 0 || !strings.Contains(r.stderr, "not yours: the operators group sees every session read-only") {
			t.Errorf("an operator's %v of root's session: exit %d %q, want refused as read-only", args, r.code, r.stderr)
		}
	}
	if r := as(operator, operatorGroups, "logs", rootSession); r.code != 0 {
		t.Errorf("an operator's logs of root's session: exit %d %q", r.code, r.stderr)
	}
	short := start(0, rootGroups, "/bin/sh", "-c", "sleep 2; echo root-says-bye")
	if r := as(operator, operatorGroups, "attach", "--read-only", short); r.code != 0 || !strings.Contains(r.stdout, "root-says-bye") {
		t.Errorf("an operator's read-only attach to root's session: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := as(operator, operatorGroups, "kill", "--signal", "TERM", rootSession); r.code != 0 {
		t.Errorf("an operator's SIGTERM to root's session: exit %d %q", r.code, r.stderr)
	}
	own := start(operator, operatorGroups, "/bin/sh", "-c", "sleep 2; echo operator-says-bye")
	if r := as(operator, operatorGroups, "attach", "--no-stdin", own); r.code != 0 || !strings.Contains(r.stdout, "operator-says-bye") {
		t.Errorf("an operator's interactive attach to its own session: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want 0660", fi.Mode().Perm())
	}
}

// TestSessionSocketIsTheOnlyWayToTheDaemon: with children.allow a sandbox
// reaches its own session socket and no other daemon socket, under either
// network mode (on Linux, NONE: the daemon performs its connects; HOST:
// mounts mask the rest; on macOS the profile allows that one socket's
// path); without it, there is no session socket at all.
func TestSessionSocketIsTheOnlyWayToTheDaemon(t *testing.T) {
	outcomeHere(t)
	f := newFixture(t)
	// Another session's socket, when this host gives sessions sockets; the
	// cases without children.allow run either way.
	other, err := startDetached(t, commandStart(false, supervisorPolicy(f.mkdir("other")), nil, "/bin/sleep", "60"))
	if err != nil && !childrenRefused(t, err) {
		t.Fatalf("start the other session: %v", err)
	}
	otherSocket := hostSessionSocket(other)
	if other == "" {
		otherSocket = hostSessionSocket("none")
	}
	// Open to everyone for the test, so that only the sandbox, never the
	// socket's mode, keeps the sandbox's uid out of the main socket.
	if err := os.Chmod(suite.daemon.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(suite.daemon.socket, 0o660) })
	for _, c := range []struct {
		name     string
		mode     sandboxdv1.Network_Mode
		children bool
	}{
		{"network none", sandboxdv1.Network_NONE, true},
		{"network host", sandboxdv1.Network_HOST, true},
		{"children not allowed", sandboxdv1.Network_NONE, false},
		{"children not allowed, network host", sandboxdv1.Network_HOST, false},
	} {
		for _, tty := range []bool{false, true} {
			t.Run(c.name+"/"+map[bool]string{false: "exec", true: "pty"}[tty], func(t *testing.T) {
				f := newFixture(t)
				pol := supervisorPolicy(f.mkdir("work"))
				pol.Network.Mode = c.mode
				pol.Children.Allow = c.children
				script := fmt.Sprintf(`echo "== env"; %[2]s env
echo "== session"; %[2]s unix-connect-only %[3]s
echo "== ps"; %[1]s --socket %[3]s ps 2>&1; echo "rc=$?"
echo "== main"; %[2]s unix-connect-only %[4]s
echo "== other"; %[2]s unix-connect-only %[5]s
echo "== end"
`, suite.sandboxctl, suite.probe, sessionSocketInScript(), suite.daemon.socket, otherSocket)
				s := run(t, commandStart(tty, pol, nil, "/bin/sh", "-c", script), nil)
				if c.children && childrenRefused(t, s.err) {
					return
				}
				exitedCleanly(t, s)
				sec := sections(s.stdout + s.stderr)
				if _, ok := sec["end"]; !ok {
					t.Fatalf("the script did not finish:\n%s", s)
				}
				env, _ := findOp(parseOutcomes(sec["env"]), "env")
				session, _ := findOp(parseOutcomes(sec["session"]), "unix-connect-only")
				ps := sec["ps"]
				if c.children {
					if got, want := envOf(env, "SANDBOXD_SOCKET"), sessionSocketIn(s.res.SessionID); got != want {
						t.Errorf("SANDBOXD_SOCKET=%q, want %q", got, want)
					}
					if !session.OK || rcOf(ps) != 0 || !strings.Contains(ps, s.res.SessionID) || (other != "" && strings.Contains(ps, other)) {
						t.Errorf("the session socket must answer with this session's subtree: connect %v\nps: %q", session, ps)
					}
				} else {
					if got := envOf(env, "SANDBOXD_SOCKET"); got != "" {
						t.Errorf("SANDBOXD_SOCKET=%q without children.allow", got)
					}
					if session.OK || rcOf(ps) == 0 {
						t.Errorf("without children.allow the sandbox reached a session socket: connect %v\nps: %q", session, ps)
					}
				}
				for _, name := range []string{"main", "other"} {
					if o, ok := findOp(parseOutcomes(sec[name]), "unix-connect-only"); !ok || o.OK {
						t.Errorf("%s daemon socket reached from the sandbox: %q", name, sec[name])
					}
				}
			})
		}
	}
}

// TestChildLimitsStayWithinTheParent: a child's limits never exceed what
// its parent has left. A child asking for more pids than its parent has is
// refused, naming limits.pids; a narrower one gets its own; and one that
// sets none is counted inside its parent's budget: with 30 of the parent's
// 64 tasks held by sleepers, the child's fork bomb holds no more than the
// rest (a child with a budget of its own would hold nearly 64).
//
// That bomb holds every task the parent has left, sandboxctl's too: a Go
// program that then needs a thread dies (newosproc, EAGAIN) and takes the
// child's report with it. sandboxctl runs on one P, and the runtime wants
// a thread when it hands that P on from a goroutine blocked in a system
// call: the read of the terminal or pipe stdin that sandboxctl forwards.
// Its stdin is /dev/null, whose read ends at once.
func TestChildLimitsStayWithinTheParent(t *testing.T) {
	outcomeHere(t)
	if runtime.GOOS == "darwin" {
		t.Skip("macOS refuses limits.pids: no cgroups")
	}
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			testChildLimits(t, tty)
		})
	}
}

func testChildLimits(t *testing.T, tty bool) {
	const sleepers, narrower = 30, 16
	f := newFixture(t)
	pol := supervisorPolicy(f.mkdir("work"))
	pol.Limits.Pids = pidsLimit
	script := fmt.Sprintf(`ctl=%[1]s; probe=%[2]s
echo "== wider"; $ctl run --pids %[3]d -- %[4]s 2>&1; echo "rc=$?"
echo "== narrower"; $ctl run --pids %[5]d -- $probe fork-bomb 0.5 2>&1; echo "rc=$?"
held=""; i=0; while [ $i -lt %[6]d ]; do sleep 60 & held="$held $!"; i=$((i+1)); done
echo "== inherit"; $ctl run -- $probe fork-bomb 1 </dev/null 2>&1; echo "rc=$?"
kill $held
echo "== end"
`, suite.sandboxctl, suite.probe, 2*pidsLimit, trueCmd, narrower, sleepers)
	s := run(t, commandStart(tty, pol, nil, "/bin/sh", "-c", script), nil)
	if u := client.UnenforceableFrom(s.err); u != nil && u.GetField() == "limits.pids" && suite.noCgroup {
		t.Skipf("refused, as %s allows: %v", noCgroupEnv, s.err)
	}
	if childrenRefused(t, s.err) {
		return
	}
	exitedCleanly(t, s)
	sec := sections(s.stdout + s.stderr)
	if _, ok := sec["end"]; !ok {
		t.Fatalf("the supervisor script did not finish:\n%s", s)
	}
	if rc := rcOf(sec["wider"]); rc != client.ExitDaemonFailed || !strings.Contains(sec["wider"], "limits.pids") {
		t.Errorf("a child asking for %d pids under a parent's %d: exit %d, want %d naming limits.pids; output %q",
			2*pidsLimit, pidsLimit, rc, client.ExitDaemonFailed, sec["wider"])
	}
	for name, limit := range map[string]int{"narrower": narrower, "inherit": pidsLimit - sleepers} {
		o, ok := findOp(parseOutcomes(sec[name]), "fork-bomb")
		if !ok || rcOf(sec[name]) != 0 {
			t.Errorf("%s: the child did not run its fork bomb: %q", name, sec[name])
			continue
		}
		t.Logf("%s: %v", name, o)
		checkForkBomb(t, o, 1, limit)
	}
}

// TestChildKeepsItsParentsMechanismSet: a child runs under its parent's
// mechanism set or is refused. A network HOST parent asks for a network
// NONE child without children of its own, the one narrowing that needs
// more of the host (a network namespace with its loopback) and that the
// landlock set could take: where the parent's set cannot give it
// (hostsim --deny netns), the child is refused naming network.mode rather
// than built by another set, which would show it what its parent never
// saw.
func TestChildKeepsItsParentsMechanismSet(t *testing.T) {
	outcomeHere(t)
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			testChildMechanismSet(t, tty)
		})
	}
}

func testChildMechanismSet(t *testing.T, tty bool) {
	f := newFixture(t)
	work := f.mkdir("work")
	pol := supervisorPolicy(work)
	pol.Network.Mode = sandboxdv1.Network_HOST
	// No children of its own: the landlock set, which refuses those,
	// would otherwise take the child.
	childPolicy := filepath.Join(work, "child.json")
	if err := os.WriteFile(childPolicy, []byte(`{"network": {"mode": "NONE"}, "children": {"allow": false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo "== none"; %s run --policy %s -- %s env 2>&1; echo "rc=$?"
echo "== end"
`, suite.sandboxctl, childPolicy, suite.probe)
	s := run(t, commandStart(tty, pol, nil, "/bin/sh", "-c", script), nil)
	if childrenRefused(t, s.err) {
		return
	}
	exitedCleanly(t, s)
	sec := sections(s.stdout + s.stderr)
	if _, ok := sec["end"]; !ok {
		t.Fatalf("the supervisor script did not finish:\n%s", s)
	}
	parentSet := inspect(t, s.res.SessionID).GetEnforcement().GetMechanismSet()
	if rc := rcOf(sec["none"]); rc == client.ExitDaemonFailed && refusalsAllowed() {
		if !strings.Contains(sec["none"], "network.mode") || !strings.Contains(sec["none"], "parent's mechanism set") {
			t.Errorf("child refused without naming network.mode and its parent's set: %q", sec["none"])
		}
		t.Logf("refused, as this host allows: %q", sec["none"])
		return
	}
	o, ok := findOp(parseOutcomes(sec["none"]), "env")
	if !ok || rcOf(sec["none"]) != 0 {
		t.Fatalf("the network none child did not run: %q", sec["none"])
	}
	child := inspect(t, envOf(o, "SANDBOXD_SESSION"))
	if got := child.GetEnforcement().GetMechanismSet(); got != parentSet || child.GetPolicy().GetNetwork().GetMode() != sandboxdv1.Network_NONE {
		t.Errorf("child runs network %v under the %q set, want network NONE under its parent's %q", child.GetPolicy().GetNetwork().GetMode(), got, parentSet)
	}
}

// TestChildOutputDrawsFromTheParent: what a child keeps of its output
// counts against its parent's limits.output_bytes. Under a parent's 1000
// bytes a first child keeps all it writes, a second only what the first
// left, a third is refused naming limits.output_bytes, and the parent
// itself keeps nothing but the marker. Children that each had the
// parent's whole budget would keep all their output and leave the
// parent's own untouched.
func TestChildOutputDrawsFromTheParent(t *testing.T) {
	outcomeHere(t)
	for _, tty := range []bool{false, true} {
		t.Run(pathName(tty), func(t *testing.T) {
			testChildOutput(t, tty)
		})
	}
}

func testChildOutput(t *testing.T, tty bool) {
	const limit = 1000
	f := newFixture(t)
	work := f.mkdir("work")
	pol := supervisorPolicy(work)
	if pol.Limits == nil {
		pol.Limits = &sandboxdv1.Limits{}
	}
	pol.Limits.OutputBytes = limit
	ttyFlag := ""
	if tty {
		ttyFlag = "--tty"
	}
	// The parent writes nothing of its own until its last line: the
	// children's output goes to files, through the sandboxctl in it.
	script := fmt.Sprintf(`ctl=%[1]s; probe=%[2]s; out=%[3]s
$ctl run %[4]s -- $probe spew 600 >$out/first 2>&1; echo $? >$out/first.rc
$ctl run %[4]s -- $probe spew 600 >$out/second 2>&1; echo $? >$out/second.rc
$ctl run %[4]s -- $probe spew 10 >$out/third 2>&1; echo $? >$out/third.rc
exec $probe spew 600
`, suite.sandboxctl, suite.probe, work, ttyFlag)
	s := run(t, commandStart(tty, pol, nil, "/bin/sh", "-c", script), nil)
	if childrenRefused(t, s.err) {
		return
	}
	exitedCleanly(t, s)
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(work, name))
		if err != nil {
			t.Fatalf("the parent's script left no %s: %v\n%s", name, err, s)
		}
		return string(b)
	}
	norm := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
	first, second, third := read("first"), read("second"), read("third")
	for name, rc := range map[string]string{"first": "0\n", "second": "0\n", "third": fmt.Sprintf("%d\n", client.ExitDaemonFailed)} {
		if got := read(name + ".rc"); got != rc {
			t.Errorf("%s child: exit %q, want %q; its output %q", name, strings.TrimSpace(got), strings.TrimSpace(rc), tail(read(name)))
		}
	}
	// The first child had the parent's whole budget and kept what it
	// wrote: 600 bytes and the probe's line.
	kept := len(first)
	if kept < 600 || kept >= limit || strings.Contains(first, "[sandboxd: output truncated") {
		t.Fatalf("first child: kept %d bytes %q; want all it wrote, 600 bytes and the probe's line", kept, tail(first))
	}
	left := limit - kept
	t.Logf("first child kept %d bytes, the second %d, the parent %d", kept, len(second), len(s.stdout+s.stderr))
	if want := strings.Repeat("x", left) + truncationMarker(left); norm(second) != want {
		t.Errorf("second child: kept %d bytes ending %q; want the %d bytes the first left, then the marker; got %q", len(second), tail(second), left, second)
	}
	if !strings.Contains(third, "limits.output_bytes") {
		t.Errorf("third child: %q; want it refused naming limits.output_bytes", third)
	}
	if got, want := norm(s.stdout+s.stderr), truncationMarker(limit); got != want {
		t.Errorf("the parent kept %d bytes ending %q; want only the marker, its children having kept its %d bytes", len(got), tail(got), limit)
	}
}
