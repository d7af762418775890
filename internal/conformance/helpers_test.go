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
	"path/filepath"
	"regexp"
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
	for _, part := range strings.Split(filepath.Clean(filepath.FromSlash(rel)), string(filepath.Separator)) {
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
	return runWith(t, suite.client, start, stdin)
}

// runWith runs start to its end on the daemon c is connected to.
func runWith(t *testing.T, c *client.Client, start *sandboxdv1.Start, stdin io.Reader) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	res, err := c.Run(ctx, client.RunOptions{Start: start, Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	s := &session{res: res, err: err, stdout: stdout.String(), stderr: stderr.String()}
	s.outcomes = parseOutcomes(s.stdout)
	return s
}

// parseOutcomes reads the probe's JSON lines; a PTY turns "\n" into "\r\n",
// and a Windows console may put escape sequences of its own before a line.
func parseOutcomes(out string) []outcome {
	var list []outcome
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "{")
		if i < 0 {
			continue
		}
		var o outcome
		if json.Unmarshal([]byte(strings.TrimSpace(line[i:])), &o) == nil {
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

// at is host:port on the origin's port.
func (o origin) at(host string) string {
	return net.JoinHostPort(host, strconv.Itoa(o.port))
}

// url is the origin's http URL under host.
func (o origin) url(host string) string {
	return "http://" + o.at(host) + "/"
}

// tail is the end of a long output, for messages.
func tail(s string) string {
	if len(s) > 120 {
		return "..." + s[len(s)-120:]
	}
	return s
}
