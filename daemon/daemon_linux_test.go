package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/transport"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

type harness struct {
	t       testing.TB
	backend *fakeBackend
	svc     *Service
	conn    *grpc.ClientConn
	client  sandboxdv1grpc.SandboxdClient
	socket  string
	stop    func() // stops the daemon and waits for Serve to return
}

// startDaemon serves a Service with the fake backend on a real unix socket.
func startDaemon(t testing.TB, opts ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, backend: &fakeBackend{}, socket: filepath.Join(t.TempDir(), "run", "sandboxd.sock")}
	var quiet atomic.Bool // t.Logf must not run after the test ends
	// Socket paths must fit in sun_path; t.TempDir's are long.
	short, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	cfg := Config{
		Backend:          h.backend,
		SocketPath:       h.socket,
		SessionSocketDir: filepath.Join(short, "s"),
		Logf: func(format string, args ...any) {
			if !quiet.Load() {
				t.Logf(format, args...)
			}
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	lis, err := transport.Listen(h.socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx, lis) }()
	stopped := false
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(func() { h.stop(); quiet.Store(true) })

	conn, err := grpc.NewClient("unix://"+h.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h.conn = conn
	h.client = sandboxdv1grpc.NewSandboxdClient(conn)
	return h
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clientSession is the client side of one session, recording what it received.
type clientSession struct {
	t       testing.TB
	stream  grpc.BidiStreamingClient[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]
	cancel  context.CancelFunc
	kinds   []string // "started", "stdout", "stderr", "exit" in arrival order
	started *sandboxdv1.Started
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	exit    *sandboxdv1.Exit
	err     error // the stream's final error, nil for a clean end
	// largest is the most data an Output message carried.
	largest int
}

func (h *harness) open(start *sandboxdv1.Start) *clientSession {
	h.t.Helper()
	return h.openCtx(context.Background(), start)
}

// openCtx is open with the stream's context made from ctx (its outgoing
// metadata, say).
func (h *harness) openCtx(ctx context.Context, start *sandboxdv1.Start) *clientSession {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	h.t.Cleanup(cancel)
	stream, err := h.client.Session(ctx)
	if err != nil {
		h.t.Fatalf("Session: %v", err)
	}
	// io.EOF: the daemon ended the stream first (a refusal at its quota);
	// Recv tells why.
	if err := stream.Send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: start}}); err != nil && !errors.Is(err, io.EOF) {
		h.t.Fatalf("send Start: %v", err)
	}
	return &clientSession{t: h.t, stream: stream, cancel: cancel}
}

// next receives one message; it returns false at the end of the stream.
func (s *clientSession) next() bool {
	m, err := s.stream.Recv()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
		return false
	}
	switch m := m.GetMsg().(type) {
	case *sandboxdv1.SessionResponse_Started:
		s.kinds = append(s.kinds, "started")
		s.started = m.Started
	case *sandboxdv1.SessionResponse_Output:
		s.largest = max(s.largest, len(m.Output.GetData()))
		if m.Output.GetStream() == sandboxdv1.Output_STDERR {
			s.kinds = append(s.kinds, "stderr")
			s.stderr.Write(m.Output.GetData())
		} else {
			s.kinds = append(s.kinds, "stdout")
			s.stdout.Write(m.Output.GetData())
		}
	case *sandboxdv1.SessionResponse_Exit:
		s.kinds = append(s.kinds, "exit")
		s.exit = m.Exit
	}
	return true
}

func (s *clientSession) waitStarted() {
	s.t.Helper()
	for s.started == nil {
		if !s.next() {
			s.t.Fatalf("stream ended before Started: %v", s.err)
		}
	}
}

func (s *clientSession) waitStdout(substr string) {
	s.t.Helper()
	for !strings.Contains(s.stdout.String(), substr) {
		if !s.next() {
			s.t.Fatalf("stream ended before %q in stdout %q: %v", substr, s.stdout.String(), s.err)
		}
	}
}

func (s *clientSession) finish() *clientSession {
	s.t.Helper()
	for s.next() {
	}
	return s
}

func (s *clientSession) send(r *sandboxdv1.SessionRequest) {
	s.t.Helper()
	if err := s.stream.Send(r); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

func (s *clientSession) stdin(data string, eof bool) {
	s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Data: []byte(data), Eof: eof}}})
}

func cmd(argv ...string) *sandboxdv1.Start {
	return &sandboxdv1.Start{Command: &sandboxdv1.Command{Argv: argv}}
}

func sh(script string) *sandboxdv1.Start {
	return cmd("/bin/sh", "-c", script)
}

// The daemon computes a policy's digest once and keeps it with the
// shared policy: each launch must still get the digest of its own
// policy, the same value every time, whichever policies came before.
func TestEachLaunchHasItsPolicysDigest(t *testing.T) {
	h := startDaemon(t)
	preset, err := policy.Preset("workspace-write", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The digest of the default policy, pinned as policy's tests pin it.
	const defaultDigest = "sha256:b7f0bb9315577a3ee3c74391586753a70b64576ad31b06d5323f9bc39d8ac6b6"
	presetDigest := policy.Digest(preset)
	for i, c := range []struct {
		pol  *sandboxdv1.Policy
		want string
	}{{nil, defaultDigest}, {preset, presetDigest}, {nil, defaultDigest}, {preset, presetDigest}} {
		start := cmd("/bin/true")
		start.Policy = c.pol
		s := h.open(start).finish()
		wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
		env, _ := envOf(h.backend.lastSpec().Env, envDigest)
		if got := s.started.GetPolicyDigest(); got != c.want || env != c.want {
			t.Errorf("launch %d: Started digest %q, %s %q; want %q", i, got, envDigest, env, c.want)
		}
	}
	if presetDigest == defaultDigest {
		t.Fatal("the preset's digest is the default policy's")
	}
}

func wantExit(t *testing.T, s *clientSession, state sandboxdv1.State, code, sig int32, reason string) {
	t.Helper()
	if s.err != nil {
		t.Fatalf("stream error: %v", s.err)
	}
	e := s.exit
	if e == nil {
		t.Fatalf("no Exit; received %v", s.kinds)
	}
	if e.GetState() != state || e.GetExitCode() != code || e.GetSignal() != sig || e.GetReason() != reason {
		t.Fatalf("Exit = %v code %d signal %d reason %q, want %v code %d signal %d reason %q",
			e.GetState(), e.GetExitCode(), e.GetSignal(), e.GetReason(), state, code, sig, reason)
	}
}

func wantCode(t *testing.T, err error, code codes.Code, substr string) *status.Status {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), substr) {
		t.Fatalf("status %v %q, want %v containing %q", st.Code(), st.Message(), code, substr)
	}
	return st
}

func TestStartedComesFirstAndExitLastAfterAllOutput(t *testing.T) {
	h := startDaemon(t)
	// Output written right before exiting must still arrive before Exit.
	s := h.open(sh("echo out; echo err >&2; head -c 300000 /dev/zero | tr '\\0' x; exit 3")).finish()
	wantExit(t, s, sandboxdv1.State_EXITED, 3, 0, "")
	if s.kinds[0] != "started" || s.kinds[len(s.kinds)-1] != "exit" {
		t.Fatalf("message order %v, want started first and exit last", s.kinds)
	}
	if got := s.stdout.String(); !strings.HasPrefix(got, "out\n") || len(got) != 4+300000 {
		t.Fatalf("stdout has %d bytes starting %.10q, want out\\n and 300000 x", len(got), got)
	}
	if got := s.stderr.String(); got != "err\n" {
		t.Fatalf("stderr %q", got)
	}
	if want := policy.Digest(policy.Normalize(nil)); s.started.GetPolicyDigest() != want {
		t.Fatalf("Started digest %q, want %q", s.started.GetPolicyDigest(), want)
	}
	if s.started.GetEnforcement().GetBackend() != "fake" || s.started.GetSessionId() == "" {
		t.Fatalf("Started = %v", s.started)
	}
}

// A client that does not show the enforcement report asks for Started
// without it; one that does not ask (every client before the field) gets
// it, and Inspect has it either way.
func TestStartedCarriesTheReportUnlessOmitted(t *testing.T) {
	h := startDaemon(t)
	for _, omit := range []bool{false, true} {
		start := cmd("/bin/true")
		start.OmitEnforcement = omit
		s := h.open(start).finish()
		wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
		if got := s.started.GetEnforcement() != nil; got == omit {
			t.Errorf("omit_enforcement %v: Started has a report: %v", omit, got)
		}
		if s.started.GetSessionId() == "" || s.started.GetPolicyDigest() == "" {
			t.Errorf("omit_enforcement %v: Started = %v", omit, s.started)
		}
		info, err := h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: s.started.GetSessionId()})
		if err != nil {
			t.Fatal(err)
		}
		if info.GetEnforcement().GetBackend() != "fake" {
			t.Errorf("omit_enforcement %v: Inspect's report = %v", omit, info.GetEnforcement())
		}
	}
}

// Output goes out in Output messages that share the bytes read (no copy
// into gRPC's buffers), many of them full: every byte must still arrive,
// once and in order, on both kinds of stdio.
func TestOutputArrivesWholeAndInOrder(t *testing.T) {
	h := startDaemon(t)
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, large := range []bool{false, true} {
		// A client that takes large messages gets them; any other, the
		// same output in parts within gRPC's 32 KiB buffers.
		ctx, limit := context.Background(), outputChunk
		if large {
			ctx, limit = metadata.AppendToOutgoingContext(ctx, outputMessageMetadata, fmt.Sprint(largeOutputMessage)), readChunk
		}
		for _, tty := range []bool{false, true} {
			start := cmd("/usr/bin/seq", "1", "200000")
			start.Tty = tty
			s := h.openCtx(ctx, start).finish()
			wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
			w := want.String()
			if tty {
				// The terminal ends its lines as terminals do.
				w = strings.ReplaceAll(w, "\n", "\r\n")
			}
			if got := s.stdout.String(); got != w {
				i := 0
				for i < min(len(got), len(w)) && got[i] == w[i] {
					i++
				}
				t.Fatalf("large %v, tty %v: %d bytes of output, want %d; they differ from byte %d on: %.20q", large, tty, len(got), len(w), i, got[i:])
			}
			if s.largest > limit {
				t.Errorf("large %v, tty %v: an Output message of %d bytes, more than %d", large, tty, s.largest, limit)
			}
		}
	}
}

func TestStdinIsForwardedAndEOFClosesIt(t *testing.T) {
	h := startDaemon(t)
	s := h.open(cmd("/bin/cat"))
	s.stdin("hello ", false)
	s.stdin("world", true)
	s.finish()
	wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
	if got := s.stdout.String(); got != "hello world" {
		t.Fatalf("cat echoed %q", got)
	}
}

func TestHalfCloseEndsStdinOfPipeSession(t *testing.T) {
	h := startDaemon(t)
	s := h.open(cmd("/bin/cat"))
	s.stdin("bye", false)
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	s.finish()
	wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
	if got := s.stdout.String(); got != "bye" {
		t.Fatalf("cat echoed %q", got)
	}
}

func TestExitCodesAndSignals(t *testing.T) {
	h := startDaemon(t)
	for _, tc := range []struct {
		script string
		code   int32
		sig    int32
	}{
		{"exit 0", 0, 0},
		{"exit 42", 42, 0},
		{"kill -TERM $$", 0, 15},
		{"kill -KILL $$", 0, 9},
	} {
		s := h.open(sh(tc.script)).finish()
		wantExit(t, s, sandboxdv1.State_EXITED, tc.code, tc.sig, "")
	}
}

func TestSignalMessageReachesCommand(t *testing.T) {
	h := startDaemon(t)
	s := h.open(sh(`trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done`))
	s.waitStdout("ready")
	s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Signal{Signal: &sandboxdv1.Signal{Signal: 15}}})
	s.finish()
	wantExit(t, s, sandboxdv1.State_EXITED, 7, 0, "")
	if !strings.Contains(s.stdout.String(), "got TERM") {
		t.Fatalf("stdout %q", s.stdout.String())
	}
}

func TestTimeoutKillsTheSandbox(t *testing.T) {
	h := startDaemon(t)
	start := cmd("/bin/sleep", "30")
	start.Policy = &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(200 * time.Millisecond)}}
	began := time.Now()
	s := h.open(start).finish()
	wantExit(t, s, sandboxdv1.State_KILLED, 0, 9, "timeout")
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("session took %v", d)
	}
	info, err := h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: s.started.GetSessionId()})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetState() != sandboxdv1.State_KILLED || info.GetReason() != "timeout" || info.GetEnded() == nil {
		t.Fatalf("Inspect after timeout: %v", info)
	}
}

func TestKillRPC(t *testing.T) {
	h := startDaemon(t)
	t.Run("signal 0 kills the sandbox", func(t *testing.T) {
		s := h.open(cmd("/bin/sleep", "30"))
		s.waitStarted()
		if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: s.started.GetSessionId()}); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		s.finish()
		wantExit(t, s, sandboxdv1.State_KILLED, 0, 9, "operator")
	})
	t.Run("a signal is delivered without deciding the state", func(t *testing.T) {
		s := h.open(cmd("/bin/sleep", "30"))
		s.waitStarted()
		if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: s.started.GetSessionId(), Signal: 15}); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		s.finish()
		wantExit(t, s, sandboxdv1.State_EXITED, 0, 15, "")
	})
	t.Run("an ended session is not running", func(t *testing.T) {
		s := h.open(cmd("/bin/true")).finish()
		_, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: s.started.GetSessionId()})
		wantCode(t, err, codes.FailedPrecondition, "not running")
	})
	t.Run("unknown id", func(t *testing.T) {
		_, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: "nope"})
		wantCode(t, err, codes.NotFound, "nope")
	})
}

func TestClientDisconnectKillsTheSandbox(t *testing.T) {
	h := startDaemon(t)
	s := h.open(cmd("/bin/sleep", "30"))
	s.waitStarted()
	id := s.started.GetSessionId()
	info, err := h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	pid := int(info.GetPid())
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("sandbox pid %d is not running", pid)
	}
	s.cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err = h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if info.GetState() == sandboxdv1.State_KILLED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still %v after the client went away", info.GetState())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info.GetReason() != "client disconnected" {
		t.Fatalf("reason %q", info.GetReason())
	}
	// KILLED is recorded after the process was reaped, so the pid is gone
	// (not even a zombie).
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(%d, 0) = %v, want ESRCH: the sandbox outlived its client", pid, err)
	}
}

func TestBadRequests(t *testing.T) {
	h := startDaemon(t)
	stdinFirst := func() error {
		stream, err := h.client.Session(ctxT(t))
		if err != nil {
			return err
		}
		stream.Send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Stdin{Stdin: &sandboxdv1.Stdin{Data: []byte("x")}}})
		_, err = stream.Recv()
		return err
	}
	bad := func(start *sandboxdv1.Start) error {
		s := h.open(start).finish()
		if s.started != nil {
			t.Errorf("bad request got Started")
		}
		return s.err
	}
	manyArgs := make([]string, maxArgs+1)
	for i := range manyArgs {
		manyArgs[i] = "x"
	}
	for _, tc := range []struct {
		name   string
		err    func() error
		substr string
	}{
		{"first message not Start", stdinFirst, "first message of a session must be Start"},
		{"no command", func() error { return bad(cmd()) }, "command.argv: missing command"},
		{"empty command", func() error { return bad(cmd("")) }, "command.argv: missing command"},
		{"relative cwd", func() error {
			s := cmd("/bin/true")
			s.Command.Cwd = "tmp"
			return bad(s)
		}, "command.cwd"},
		{"huge argv by size", func() error {
			// Each argument within execve's own limit, all of them past the daemon's.
			argv := []string{"/bin/echo"}
			for range maxArgvBytes/(64<<10) + 1 {
				argv = append(argv, strings.Repeat("a", 64<<10))
			}
			return bad(cmd(argv...))
		}, "huge argv"},
		{"one argument past execve's limit", func() error { return bad(cmd("/bin/echo", strings.Repeat("a", maxArgBytes))) }, "command.argv[1]"},
		{"huge argv by count", func() error { return bad(cmd(append([]string{"/bin/echo"}, manyArgs...)...)) }, "huge argv"},
		{"NUL in argv", func() error { return bad(cmd("/bin/echo", "a\x00b")) }, "command.argv[1]"},
		{"relative write root", func() error {
			s := cmd("/bin/true")
			s.Policy = &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"rel/dir"}}}
			return bad(s)
		}, "filesystem.write[0]"},
		{"forged session variable", func() error {
			s := cmd("/bin/true")
			s.Command.Env = map[string]string{"SANDBOXD_POLICY_DIGEST": "sha256:0"}
			return bad(s)
		}, "SANDBOXD_POLICY_DIGEST"},
		{"env name with =", func() error {
			s := cmd("/bin/true")
			s.Command.Env = map[string]string{"A=B": "c"}
			return bad(s)
		}, "command.env"},
		{"window too large", func() error {
			s := cmd("/bin/true")
			s.Tty = true
			s.Window = &sandboxdv1.WindowSize{Rows: 70000, Cols: 80}
			return bad(s)
		}, "window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.err(), codes.InvalidArgument, tc.substr)
		})
	}
	if n := len(h.svc.List(context.Background(), Caller{})); n != 0 {
		t.Fatalf("rejected requests left %d sessions in the registry", n)
	}
}

func TestUnenforceableIsFailedPreconditionWithDetail(t *testing.T) {
	h := startDaemon(t)
	h.backend.refuse = &launcher.Unenforceable{
		Field:     "network.mode",
		Mechanism: "network namespace",
		Errno:     syscall.EPERM,
		Probe:     "unshare(CLONE_NEWNET)",
		Remedy:    "allow unprivileged user namespaces",
	}
	s := h.open(cmd("/bin/true")).finish()
	if s.started != nil || s.exit != nil {
		t.Fatalf("refused session got %v", s.kinds)
	}
	st := wantCode(t, s.err, codes.FailedPrecondition, "cannot enforce network.mode")
	var detail *sandboxdv1.Unenforceable
	for _, d := range st.Details() {
		if u, ok := d.(*sandboxdv1.Unenforceable); ok {
			detail = u
		}
	}
	if detail.GetField() != "network.mode" || detail.GetProbe() != "unshare(CLONE_NEWNET)" || !strings.HasPrefix(detail.GetErrno(), "EPERM") || detail.GetRemedy() == "" {
		t.Fatalf("Unenforceable detail = %v", detail)
	}
	list, err := h.client.List(ctxT(t), &sandboxdv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetSessions()) != 1 {
		t.Fatalf("List = %v", list)
	}
	if in := list.GetSessions()[0]; in.GetState() != sandboxdv1.State_FAILED_TO_START || !strings.Contains(in.GetReason(), "network.mode") {
		t.Fatalf("refused session listed as %v %q", in.GetState(), in.GetReason())
	}
}

func TestCommandThatCannotBeExecutedExits126Or127(t *testing.T) {
	h := startDaemon(t)
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		code int32
	}{
		{"/nonexistent/command", 127},
		{notExec, 126},
	} {
		s := h.open(cmd(tc.path)).finish()
		if s.started != nil {
			t.Fatalf("%s: got Started for a command that never ran", tc.path)
		}
		if s.exit.GetState() != sandboxdv1.State_FAILED_TO_START || s.exit.GetExitCode() != tc.code || !strings.Contains(s.exit.GetReason(), tc.path) {
			t.Fatalf("%s: Exit = %v, err %v", tc.path, s.exit, s.err)
		}
	}
}

func TestEnvironmentIsBuiltNotInherited(t *testing.T) {
	h := startDaemon(t)
	t.Setenv("SANDBOXD_TEST_DAEMON_SECRET", "leaked")
	start := cmd("/usr/bin/env")
	start.Command.Env = map[string]string{"FOO": "bar", "LANG": "en_US.UTF-8"}
	s := h.open(start).finish()
	wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
	got := strings.Split(strings.TrimSpace(s.stdout.String()), "\n")
	uid, _ := h.svc.sandboxIdentity(Caller{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())})
	want := []string{
		"FOO=bar",
		"HOME=" + new(passwdHomes).lookup("/etc/passwd", uid),
		"LANG=en_US.UTF-8",
		"PATH=" + defaultPath,
		"SANDBOXD_POLICY_DIGEST=" + s.started.GetPolicyDigest(),
		"SANDBOXD_SESSION=" + s.started.GetSessionId(),
		"TERM=dumb",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("environment:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCallerIdentity(t *testing.T) {
	h := startDaemon(t)
	s := h.open(cmd("/bin/true")).finish()
	info, err := h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: s.started.GetSessionId()})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetOwnerUid() != uint32(os.Getuid()) {
		t.Fatalf("owner_uid %d, want the caller's uid %d from SO_PEERCRED", info.GetOwnerUid(), os.Getuid())
	}
	spec := h.backend.lastSpec()
	wantUID := uint32(os.Getuid())
	if wantUID == 0 {
		wantUID = DefaultSandboxID
	}
	if spec.UID != wantUID || spec.UID == 0 || spec.GID == 0 {
		t.Fatalf("sandbox runs as %d:%d, want uid %d and never 0", spec.UID, spec.GID, wantUID)
	}
	if want := []string{h.socket, h.svc.cfg.SessionSocketDir}; !slices.Equal(spec.HideSockets, want) {
		t.Fatalf("HideSockets = %q, want the daemon socket and the session sockets' directory %q", spec.HideSockets, want)
	}
}

func TestListAndInspect(t *testing.T) {
	h := startDaemon(t)
	start := cmd("/bin/sh", "-c", "exit 5")
	start.Command.Cwd = "/tmp"
	start.Policy = &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/tmp/b", "/tmp/a/../a"}}}
	done := h.open(start).finish()
	live := h.open(cmd("/bin/sleep", "30"))
	live.waitStarted()

	list, err := h.client.List(ctxT(t), &sandboxdv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetSessions()) != 2 || list.GetSessions()[0].GetId() != done.started.GetSessionId() || list.GetSessions()[1].GetId() != live.started.GetSessionId() {
		t.Fatalf("List = %v", list)
	}
	in := list.GetSessions()[0]
	if in.GetState() != sandboxdv1.State_EXITED || in.GetExitCode() != 5 || in.GetCwd() != "/tmp" ||
		strings.Join(in.GetArgv(), " ") != "/bin/sh -c exit 5" || in.GetCreated() == nil || in.GetEnded() == nil ||
		in.GetEnforcement().GetBackend() != "fake" || in.GetPid() == 0 {
		t.Fatalf("ended session info = %v", in)
	}
	// Inspect shows the normalized policy, whose digest the sandbox saw.
	if w := in.GetPolicy().GetFilesystem().GetWrite(); strings.Join(w, ",") != "/tmp/a,/tmp/b" {
		t.Fatalf("policy write roots %q, want normalized", w)
	}
	if in.GetPolicyDigest() != policy.Digest(in.GetPolicy()) || in.GetPolicyDigest() != done.started.GetPolicyDigest() {
		t.Fatalf("digest %q does not match the policy shown", in.GetPolicyDigest())
	}
	if st := list.GetSessions()[1].GetState(); st != sandboxdv1.State_RUNNING {
		t.Fatalf("live session is %v", st)
	}
	_, err = h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: "0123456789abcdef"})
	wantCode(t, err, codes.NotFound, "0123456789abcdef")
}

func TestEndedSessionsAreBounded(t *testing.T) {
	const retainEnded = 4
	h := startDaemon(t, func(c *Config) { c.RetainEnded = retainEnded })
	var first string
	for i := range retainEnded + 3 {
		s := h.open(cmd("/bin/true")).finish()
		if i == 0 {
			first = s.started.GetSessionId()
		}
	}
	// The last session's Exit reaches the client just before the daemon
	// files it among the ended ones.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := len(h.svc.List(context.Background(), Caller{}))
		if n == retainEnded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry holds %d ended sessions, want %d", n, retainEnded)
		}
	}
	if _, err := h.svc.Inspect(context.Background(), Caller{}, first, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oldest session still inspectable: %v", err)
	}
}

func TestTerminalSession(t *testing.T) {
	h := startDaemon(t)
	t.Run("size, resize and controlling terminal", func(t *testing.T) {
		start := sh(`stty size; test -t 0 && test -t 2 && echo "TERM=$TERM"; read x; stty size`)
		start.Tty = true
		start.Window = &sandboxdv1.WindowSize{Rows: 40, Cols: 100}
		s := h.open(start)
		s.waitStdout("TERM=xterm-256color")
		s.send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Resize{Resize: &sandboxdv1.WindowSize{Rows: 50, Cols: 120}}})
		s.stdin("\n", false)
		s.finish()
		wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
		out := s.stdout.String()
		if !strings.HasPrefix(out, "40 100\r\n") || !strings.HasSuffix(out, "50 120\r\n") {
			t.Fatalf("terminal output %q", out)
		}
		if s.stderr.Len() != 0 {
			t.Fatalf("PTY output came as stderr: %q", s.stderr.String())
		}
	})
	t.Run("EOF is ^D", func(t *testing.T) {
		start := cmd("/bin/cat")
		start.Tty = true
		s := h.open(start)
		s.stdin("typed\n", true)
		s.finish()
		wantExit(t, s, sandboxdv1.State_EXITED, 0, 0, "")
		// The line discipline echoes the input, then cat writes it.
		if got := s.stdout.String(); got != "typed\r\ntyped\r\n" {
			t.Fatalf("terminal output %q", got)
		}
	})
	t.Run("signal from the terminal", func(t *testing.T) {
		start := sh(`echo ready; exec sleep 30`)
		start.Tty = true
		s := h.open(start)
		s.waitStdout("ready")
		s.stdin("\x03", false)
		s.finish()
		wantExit(t, s, sandboxdv1.State_EXITED, 0, 2, "")
	})
}

func TestShutdownKillsSandboxesAndRemovesSocket(t *testing.T) {
	h := startDaemon(t)
	s := h.open(cmd("/bin/sleep", "30"))
	s.waitStarted()
	h.stop()
	s.finish()
	wantExit(t, s, sandboxdv1.State_KILLED, 0, 9, "daemon shutdown")
	if _, err := os.Lstat(h.socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestSandboxIdentityIsNeverRoot(t *testing.T) {
	svc, err := New(Config{Backend: &fakeBackend{}, SandboxUID: 1234, SandboxGID: 5678})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want [2]uint32 }{
		{[2]uint32{0, 0}, [2]uint32{1234, 5678}},
		{[2]uint32{1000, 1000}, [2]uint32{1000, 1000}},
		{[2]uint32{1000, 0}, [2]uint32{1000, 5678}},
	} {
		uid, gid := svc.sandboxIdentity(Caller{UID: tc.in[0], GID: tc.in[1]})
		if uid != tc.want[0] || gid != tc.want[1] {
			t.Errorf("caller %d:%d runs as %d:%d, want %d:%d", tc.in[0], tc.in[1], uid, gid, tc.want[0], tc.want[1])
		}
	}
	def, _ := New(Config{Backend: &fakeBackend{}})
	if uid, gid := def.sandboxIdentity(Caller{}); uid != DefaultSandboxID || gid != DefaultSandboxID {
		t.Errorf("root caller with default config runs as %d:%d", uid, gid)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a backend succeeded")
	}
}

func TestCallersSeeOnlyTheirOwnSessions(t *testing.T) {
	operators := uint32(4545)
	h := startDaemon(t, func(c *Config) { c.OperatorsGroup = strconv.Itoa(os.Getgid()) })
	h.svc.operators = &operators // a gid no test user has by accident
	s := h.open(cmd("/bin/sleep", "30"))
	s.waitStarted()
	id := s.started.GetSessionId()
	stranger := Caller{UID: 4242, GID: 4242, Groups: []uint32{4343}}
	if os.Geteuid() == 4242 {
		stranger.UID = 4343
	}
	ctx := context.Background()
	if list := h.svc.List(ctx, stranger); len(list) != 0 {
		t.Errorf("a stranger lists %d sessions of others", len(list))
	}
	if _, err := h.svc.Inspect(ctx, stranger, id, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("Inspect by a stranger: %v, want not found", err)
	}
	err := h.svc.Kill(ctx, stranger, id, 0)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Kill by a stranger: %v, want not found", err)
	}
	wantCode(t, toStatus(err), codes.NotFound, id)

	operator := stranger
	operator.Groups = []uint32{1, operators}
	if list := h.svc.List(ctx, operator); len(list) != 1 || list[0].GetId() != id {
		t.Errorf("an operator lists %v, want the one session", list)
	}
	if _, err := h.svc.Inspect(ctx, operator, id, false); err != nil {
		t.Errorf("Inspect by an operator: %v", err)
	}
	if err := h.svc.Kill(ctx, Caller{UID: uint32(os.Getuid())}, id, 0); err != nil {
		t.Fatalf("Kill by owner: %v", err)
	}
	s.finish()
	wantExit(t, s, sandboxdv1.State_KILLED, 0, 9, "operator")
}

// An operator kills another's session (SIGTERM, SIGKILL, signal 0 for the
// whole sandbox) and controls nothing else of it: no other signal, no
// interactive attach, no patch, commit or discard of its layers. The
// Service refuses these itself, so an in-process caller meets the same
// refusals as a gRPC one.
func TestOperatorsOnlyKillAnothersSession(t *testing.T) {
	operators := uint32(4545)
	h := startDaemon(t, func(c *Config) {
		c.OperatorsGroup = strconv.Itoa(os.Getgid())
		c.StateDir = t.TempDir()
	})
	h.svc.operators = &operators // a gid no test user has by accident
	operator := Caller{UID: 4242, GID: 4242, Groups: []uint32{operators}}
	if os.Geteuid() == 4242 {
		operator.UID = 4343
	}
	ctx := context.Background()

	term := h.open(cmd("/bin/sleep", "30"))
	term.waitStarted()
	id := term.started.GetSessionId()
	if err := h.svc.Kill(ctx, operator, id, 10); !errors.Is(err, ErrPermission) {
		t.Errorf("an operator's signal 10: %v, want a permission error", err)
	}
	if err := h.svc.attach(operator, nil, &sandboxdv1.Attach{Id: id}); !errors.Is(err, ErrPermission) {
		t.Errorf("an operator's interactive attach: %v, want a permission error", err)
	}
	if err := h.svc.Kill(ctx, operator, id, 15); err != nil {
		t.Errorf("an operator's SIGTERM: %v", err)
	}
	term.finish()
	kill := h.open(cmd("/bin/sleep", "30"))
	kill.waitStarted()
	if err := h.svc.Kill(ctx, operator, kill.started.GetSessionId(), 0); err != nil {
		t.Errorf("an operator's kill: %v", err)
	}
	wantExit(t, kill.finish(), sandboxdv1.State_KILLED, 0, 9, "operator")

	if os.Geteuid() != 0 {
		t.Skip("only a root daemon makes layers")
	}
	start := cmd("/bin/sh", "-c", "echo x > f")
	start.Command.Cwd = t.TempDir()
	start.Policy = &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{start.Command.Cwd}}}
	layered := h.open(start)
	wantExit(t, layered.finish(), sandboxdv1.State_EXITED, 0, 0, "")
	lid := layered.started.GetSessionId()
	if _, err := h.svc.Diff(operator, lid, false); err != nil {
		t.Errorf("an operator's diff: %v", err)
	}
	if _, err := h.svc.Diff(operator, lid, true); !errors.Is(err, ErrPermission) {
		t.Errorf("an operator's patch: %v, want a permission error", err)
	}
	if _, err := h.svc.Commit(operator, lid, false); !errors.Is(err, ErrPermission) {
		t.Errorf("an operator's commit: %v, want a permission error", err)
	}
	if err := h.svc.Discard(operator, lid); !errors.Is(err, ErrPermission) {
		t.Errorf("an operator's discard: %v, want a permission error", err)
	}
	if err := h.svc.Discard(Caller{UID: uint32(os.Getuid())}, lid); err != nil {
		t.Errorf("the owner's discard: %v", err)
	}
}

func TestUnknownOperatorsGroupIsAnError(t *testing.T) {
	_, err := New(Config{Backend: &fakeBackend{}, OperatorsGroup: "no-such-group-sandboxd"})
	if err == nil || !strings.Contains(err.Error(), "no-such-group-sandboxd") {
		t.Fatalf("New with an unknown operators group: %v", err)
	}
}

func TestReflectionListsTheService(t *testing.T) {
	h := startDaemon(t)
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "sandboxd.v1.Sandboxd") {
		t.Fatalf("reflection lists %q", names)
	}
}
