//go:build linux || darwin

package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// payload is what the probe writes; see probe.Payload.
const payload = "written by sandboxd conformance probe\n"

// sessionTimeout bounds every session the suite runs; probes finish in well
// under a second, so hitting it is a hang to report.
const sessionTimeout = 60 * time.Second

// fixture is a fresh directory tree for one case, owned by the sandbox
// identity.
type fixture struct {
	t   *testing.T
	dir string
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9]+`)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	parent := filepath.Join(suite.root, "c")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	// Short: unix socket paths in fixtures must stay under 104 bytes
	// (macOS; Linux allows 108).
	name := unsafeName.ReplaceAllString(t.Name(), "-")
	if len(name) > 24 {
		name = name[len(name)-24:]
	}
	dir, err := os.MkdirTemp(parent, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir}
	f.own(dir)
	return f
}

// own hands path to the sandbox identity. Without it a root daemon's
// sandboxes (uid 65533) would be stopped by file modes alone, and a case
// would pass without the sandbox doing anything.
func (f *fixture) own(path string) {
	f.t.Helper()
	if !suite.asRoot {
		return
	}
	if err := os.Lchown(path, suite.uid, suite.gid); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) path(rel string) string {
	return filepath.Join(f.dir, rel)
}

// mkdir creates rel and its missing parents, all owned by the sandbox.
func (f *fixture) mkdir(rel string) string {
	f.t.Helper()
	p := f.dir
	for _, part := range strings.Split(filepath.Clean(rel), "/") {
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			f.t.Fatal(err)
		}
		f.own(p)
	}
	return p
}

// file creates rel with content, owned by the sandbox and writable by it.
func (f *fixture) file(rel, content string) string {
	f.t.Helper()
	if d := filepath.Dir(rel); d != "." {
		f.mkdir(d)
	}
	p := f.path(rel)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.own(p)
	return p
}

func (f *fixture) symlink(rel, target string) string {
	f.t.Helper()
	p := f.path(rel)
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
	f.own(p)
	return p
}

// unchanged fails the test when the host file at path no longer holds want.
func unchanged(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("host file %s: %v (want it unchanged)", path, err)
		return
	}
	if string(got) != want {
		t.Errorf("host file %s now holds %q, want it unchanged (%q)", path, got, want)
	}
}

// absent fails the test when the host has a regular file at path.
func absent(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err == nil && !fi.IsDir() {
		b, _ := os.ReadFile(path)
		t.Errorf("host file %s exists (%q), want it never created", path, b)
	}
}

// session is a finished session as the client saw it.
type session struct {
	res      *client.Result
	err      error
	stdout   string
	stderr   string
	outcomes []outcome
}

func (s *session) String() string {
	return fmt.Sprintf("stdout: %q\nstderr: %q", s.stdout, s.stderr)
}

// exit is the session's Exit, nil when it has none.
func (s *session) exit() *sandboxdv1.Exit {
	if s.res == nil {
		return nil
	}
	return s.res.Exit
}

func (s *session) exitCode() int {
	return client.ExitCode(s.res, s.err)
}

func probeStart(tty bool, p *sandboxdv1.Policy, env map[string]string, args ...string) *sandboxdv1.Start {
	return commandStart(tty, p, env, append([]string{suite.probe}, args...)...)
}

func commandStart(tty bool, p *sandboxdv1.Policy, env map[string]string, argv ...string) *sandboxdv1.Start {
	st := &sandboxdv1.Start{
		Policy:  p,
		Command: &sandboxdv1.Command{Argv: argv, Env: env},
		Tty:     tty,
	}
	if tty {
		st.Window = &sandboxdv1.WindowSize{Rows: 24, Cols: 80}
	}
	return st
}

// run runs start to its end on the suite's daemon.
func run(t *testing.T, start *sandboxdv1.Start, stdin io.Reader) *session {
	t.Helper()
	requireDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	res, err := suite.client.Run(ctx, client.RunOptions{Start: start, Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	s := &session{res: res, err: err, stdout: stdout.String(), stderr: stderr.String()}
	s.outcomes = parseOutcomes(s.stdout)
	return s
}

// parseOutcomes reads the probe's JSON lines; a PTY turns "\n" into "\r\n".
func parseOutcomes(out string) []outcome {
	var list []outcome
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var o outcome
		if json.Unmarshal([]byte(line), &o) == nil {
			list = append(list, o)
		}
	}
	return list
}

// exitedCleanly fails the test unless the session ran and its command
// exited 0: the probe always does, so anything else is a broken sandbox.
func exitedCleanly(t *testing.T, s *session) {
	t.Helper()
	if s.err != nil {
		t.Fatalf("session failed: %v\n%s", s.err, s)
	}
	e := s.res.Exit
	if e.GetState() != sandboxdv1.State_EXITED || e.GetExitCode() != 0 || e.GetSignal() != 0 {
		t.Fatalf("probe did not exit 0: state %v code %d signal %d reason %q\n%s", e.GetState(), e.GetExitCode(), e.GetSignal(), e.GetReason(), s)
	}
}

// background is a session left running while the test looks at the host.
type background struct {
	out  *syncBuffer
	done chan struct{}
	res  *client.Result
	err  error
}

func runBackground(t *testing.T, c *client.Client, start *sandboxdv1.Start) *background {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	b := &background{out: &syncBuffer{}, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer cancel()
		b.res, b.err = c.Run(ctx, client.RunOptions{Start: start, Stdout: b.out, Stderr: b.out})
	}()
	t.Cleanup(func() {
		cancel()
		<-b.done
	})
	return b
}

// waitOutput waits until the session printed s.
func (b *background) waitOutput(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(b.out.String(), s) {
		select {
		case <-b.done:
			t.Fatalf("session ended before printing %q: %v\noutput: %q", s, b.err, b.out.String())
		case <-deadline:
			t.Fatalf("session did not print %q within 20s; output: %q", s, b.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *background) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(limit):
		t.Fatalf("session did not end within %v; output: %q", limit, b.out.String())
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tcpListener listens on the host's loopback and greets every connection
// with a token, so a probe that reads it has reached this listener and not
// one of its own.
func tcpListener(t *testing.T) (addr, token string) {
	t.Helper()
	return tcpListenerOn(t, "127.0.0.1")
}

func unixListener(t *testing.T, path string) (token string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, "@") {
		// The sandbox user must be able to connect if nothing else stops it.
		if err := os.Chmod(path, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return serveToken(t, l)
}

func serveToken(t *testing.T, l net.Listener) string {
	token := "token-" + randomHex()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(token))
			c.Close()
		}
	}()
	return token
}

// udpEcho answers every datagram on the host's loopback with a token.
func udpEcho(t *testing.T) (addr, token string) {
	t.Helper()
	return udpEchoOn(t, "127.0.0.1")
}

// hostSleep starts a process on the host, outside any sandbox, for probes to
// try to signal.
func hostSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func fsPolicy(write, readOnly, deny []string) *sandboxdv1.Policy {
	return &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: write, ReadOnly: readOnly, Deny: deny}}
}

func netPolicy(mode sandboxdv1.Network_Mode) *sandboxdv1.Policy {
	return &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: mode}}
}

func list(s ...string) []string { return s }

// tcpListenerOn is tcpListener on the host address ip.
func tcpListenerOn(t *testing.T, ip string) (addr, token string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return l.Addr().String(), serveToken(t, l)
}

// udpEchoOn is udpEcho on the host address ip.
func udpEchoOn(t *testing.T, ip string) (addr, token string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	token = "token-" + randomHex()
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(token), from)
		}
	}()
	return pc.LocalAddr().String(), token
}

// hostAddress is an address of this host outside the loopback: the first
// IPv4 address of an interface that is up, or "" when there is none.
func hostAddress() string {
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// httpOrigin serves HTTP on l: every request gets 200 and a token, which a
// probe that reads it can only have got from this server.
func httpOrigin(t *testing.T, l net.Listener) (token string) {
	t.Helper()
	token = "origin-" + randomHex()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, token)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return token
}

// origin is an HTTP server on the host for the allowlist cases.
type origin struct {
	port int
	// token is what it answers on 127.0.0.1, token6 on [::1] (when it
	// listens there).
	token, token6 string
}

// newOrigin starts an HTTP server on the host's 127.0.0.1.
func newOrigin(t *testing.T) origin {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return origin{port: l.Addr().(*net.TCPAddr).Port, token: httpOrigin(t, l)}
}

// newDualOrigin starts an HTTP server on the host's 127.0.0.1 and [::1]
// at the same port, each answering with its own token. On a host without
// an IPv6 loopback it skips the test when ipv6 is required, and otherwise
// serves 127.0.0.1 alone.
func newDualOrigin(t *testing.T, required bool) origin {
	t.Helper()
	for range 20 {
		l6, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			if required {
				t.Skipf("no IPv6 loopback on this host: %v", err)
			}
			t.Logf("no IPv6 loopback on this host (%v): serving 127.0.0.1 only", err)
			return newOrigin(t)
		}
		port := l6.Addr().(*net.TCPAddr).Port
		l4, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			l6.Close()
			continue
		}
		return origin{port: port, token: httpOrigin(t, l4), token6: httpOrigin(t, l6)}
	}
	t.Fatal("found no port free on both 127.0.0.1 and [::1]")
	return origin{}
}

// at is host:port on the origin's port.
func (o origin) at(host string) string {
	return net.JoinHostPort(host, strconv.Itoa(o.port))
}

// url is the origin's http URL under host.
func (o origin) url(host string) string {
	return "http://" + o.at(host) + "/"
}

// denialWant is what one denial a case expects must say; empty fields are
// not compared. detail, when set, must be in the denial's detail, and
// needDetail asks for a detail at all.
type denialWant struct {
	field, operation, target, errno, detail string
	needDetail                              bool
}

func (w denialWant) String() string {
	return fmt.Sprintf("field %q operation %q target %q errno %q detail %q (required: %v)", w.field, w.operation, w.target, w.errno, w.detail, w.needDetail)
}

func (w denialWant) matches(d *sandboxdv1.Denial) bool {
	return d.GetField() == w.field &&
		(w.operation == "" || d.GetOperation() == w.operation) &&
		(w.target == "" || d.GetTarget() == w.target) &&
		(w.errno == "" || d.GetErrno() == w.errno) &&
		(!w.needDetail || d.GetDetail() != "") &&
		strings.Contains(d.GetDetail(), w.detail)
}

// recordedDenials waits until Inspect of session id lists a denial like
// each of wants, failing the test for those that do not appear within 10s
// (plus denialLag), and returns what it found, in the order of wants.
func recordedDenials(t *testing.T, id string, wants ...denialWant) []*sandboxdv1.Denial {
	t.Helper()
	found := make([]*sandboxdv1.Denial, len(wants))
	deadline := time.Now().Add(10*time.Second + denialLag)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := suite.client.Inspect(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		missing := 0
		for i, w := range wants {
			if j := slices.IndexFunc(info.GetRecentDenials(), w.matches); j >= 0 {
				found[i] = info.GetRecentDenials()[j]
			} else {
				missing++
			}
		}
		if missing == 0 {
			return found
		}
		if time.Now().After(deadline) {
			var seen strings.Builder
			for _, d := range info.GetRecentDenials() {
				fmt.Fprintf(&seen, "  %v\n", d)
			}
			for i, w := range wants {
				if found[i] == nil {
					t.Errorf("session %s: Inspect lists no denial with %v; it lists %d (count %d):\n%s", id, w, len(info.GetRecentDenials()), info.GetDenialCount(), seen.String())
				}
			}
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// auditedDenial waits until the suite daemon's audit log has a denial line
// of session id like w (field, operation, target), failing the test if
// none appears within 10s (plus denialLag).
func auditedDenial(t *testing.T, id string, w denialWant) {
	t.Helper()
	deadline := time.Now().Add(10*time.Second + denialLag)
	for {
		var lines []string
		for _, l := range readAudit(t, suite.daemon.state) {
			if l.Session != id {
				continue
			}
			lines = append(lines, l.raw)
			if d := l.Denial; l.Type == "denial" && d != nil && d.Field == w.field &&
				(w.operation == "" || d.Operation == w.operation) && (w.target == "" || d.Target == w.target) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("audit log: no denial of session %s with %v; its lines:\n%s", id, w, strings.Join(lines, "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enforcedBy fails the test unless the session's enforcement report names
// a mechanism for field: what a session reports comes from what the
// backend enforced.
func enforcedBy(t *testing.T, s *session, field string) {
	t.Helper()
	for _, f := range s.res.Enforcement.GetFields() {
		if f.GetField() == field && f.GetMechanism() != "" {
			t.Logf("%s enforced by: %s", field, f.GetMechanism())
			return
		}
	}
	t.Errorf("the enforcement report names no mechanism for %s: %v", field, s.res.Enforcement.GetFields())
}
