package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/selftest"
)

func TestMain(m *testing.M) {
	// The fake backend starts the self-test's probe, a copy of this binary.
	selftest.RunProbeIfRequested()
	os.Exit(m.Run())
}

// gatedBackend holds every Start until gate is closed, so a test can look
// at a self-test while it runs.
type gatedBackend struct {
	*fakeBackend
	gate chan struct{}
}

func (g *gatedBackend) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, fmt.Errorf("gated start: %w", ctx.Err())
	}
	return g.fakeBackend.Start(ctx, spec)
}

// logLines collects a Service's log, safe to read while it writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestRunSelfTestIsAttachedToCapabilities(t *testing.T) {
	b := &fakeBackend{}
	svc, err := New(Config{Backend: b, SandboxUID: 1234, SandboxGID: 5678})
	if err != nil {
		t.Fatal(err)
	}
	if r := svc.Capabilities(ctxT(t)); r.GetBackend() != "fake" || r.GetSelfTest() != nil {
		t.Fatalf("before any self-test: %v", r)
	}
	st := svc.RunSelfTest(ctxT(t))
	// The fake backend confines nothing: a pass would be a lie.
	if st.GetPassed() || len(st.GetChecks()) < 2 {
		t.Fatalf("self-test through the unconfined fake backend: %v", st)
	}
	spec := b.lastSpec()
	wantUID, wantGID := uint32(os.Geteuid()), uint32(os.Getegid())
	if os.Geteuid() == 0 {
		wantUID, wantGID = 1234, 5678
	}
	if spec.UID != wantUID || spec.GID != wantGID {
		t.Errorf("self-test ran as %d:%d, want %d:%d", spec.UID, spec.GID, wantUID, wantGID)
	}
	if want := filepath.Base(spec.Argv[0]); want != selftest.ProbeName {
		t.Errorf("argv[0] %q", spec.Argv[0])
	}
	r := svc.Capabilities(ctxT(t))
	if r.GetBackend() != "fake" || r.GetSelfTest().GetRan() == nil || len(r.GetSelfTest().GetChecks()) != len(st.GetChecks()) {
		t.Fatalf("after the self-test: %v", r)
	}
	// What Capabilities returns is the caller's to change.
	r.SelfTest.Passed = true
	if svc.Capabilities(ctxT(t)).GetSelfTest().GetPassed() {
		t.Error("changing a returned report changed the stored self-test")
	}
}

func TestCapabilitiesRPC(t *testing.T) {
	h := startDaemon(t)
	r, err := h.client.Capabilities(ctxT(t), &sandboxdv1.CapabilitiesRequest{})
	if err != nil || r.GetBackend() != "fake" {
		t.Fatalf("Capabilities = %v, %v", r, err)
	}
	// Serve alone runs no self-test; ListenAndServe does.
	if r.GetSelfTest() != nil {
		t.Errorf("self-test %v", r.GetSelfTest())
	}
}

func TestListenAndServeRunsTheSelfTest(t *testing.T) {
	b := &gatedBackend{fakeBackend: &fakeBackend{}, gate: make(chan struct{})}
	var log logLines
	sock := filepath.Join(t.TempDir(), "run", "d.sock")
	svc, err := New(Config{Backend: b, SocketPath: sock, Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- svc.ListenAndServe(ctx) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := sandboxdv1grpc.NewSandboxdClient(conn)
	capabilities := func() *sandboxdv1.CapabilitiesReport {
		t.Helper()
		for {
			r, err := client.Capabilities(ctxT(t), &sandboxdv1.CapabilitiesRequest{}, grpc.WaitForReady(true))
			if err == nil {
				return r
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if st := capabilities().GetSelfTest(); st.GetPassed() || len(st.GetChecks()) != 1 || st.GetChecks()[0].GetName() != "pending" {
		t.Fatalf("while the self-test runs: %v", st)
	}
	close(b.gate)
	deadline := time.Now().Add(20 * time.Second)
	var st *sandboxdv1.SelfTest
	for {
		st = capabilities().GetSelfTest()
		if st.GetRan() != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.GetPassed() || st.GetRan() == nil {
		t.Fatalf("self-test through the unconfined fake backend: %v", st)
	}
	// The socket is under /tmp, which sandboxes cannot see.
	if dir := filepath.Dir(b.lastSpec().Argv[0]); !strings.HasPrefix(dir, "/var/tmp/") {
		t.Errorf("self-test fixtures in %s, want /var/tmp", dir)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	text := log.text()
	for _, want := range []string{"self-test: ok   write-root:", "self-test: FAIL read-deny:", "self-test FAILED (mechanism set " + fakeMechanismSet + "): write-outside:"} {
		if !strings.Contains(text, want) {
			t.Errorf("log has no %q:\n%s", want, text)
		}
	}
}

func TestListenAndServeStopsAPendingSelfTest(t *testing.T) {
	b := &gatedBackend{fakeBackend: &fakeBackend{}, gate: make(chan struct{})}
	var log logLines
	svc, err := New(Config{Backend: b, SocketPath: filepath.Join(t.TempDir(), "d.sock"), Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.ListenAndServe(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ListenAndServe did not return with its self-test pending")
	}
	// Whatever ListenAndServe started has finished and said so.
	if st := svc.Capabilities(ctxT(t)).GetSelfTest(); st.GetPassed() || st.GetChecks()[0].GetName() != "start" {
		t.Errorf("self-test after shutdown: %v", st)
	}
	if !strings.Contains(log.text(), "self-test FAILED: start: start the probe: gated start: context canceled") {
		t.Errorf("log:\n%s", log.text())
	}
}

func TestSelfTestDir(t *testing.T) {
	open, err := os.MkdirTemp("/var/tmp", "daemon-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	os.Chmod(open, 0o755)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"explicit", Config{SelfTestDir: "/srv/x", SocketPath: filepath.Join(open, "d.sock")}, "/srv/x"},
		{"socket directory", Config{SocketPath: filepath.Join(open, "d.sock")}, open},
		{"socket under /tmp", Config{SocketPath: "/tmp/sandboxd-1000/d.sock"}, "/var/tmp"},
		{"no socket", Config{}, "/var/tmp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Backend = unusedBackend{}
			svc, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := svc.selfTestDir(65533, 65533); got != tc.want {
				t.Errorf("selfTestDir = %q, want %q", got, tc.want)
			}
		})
	}
}
