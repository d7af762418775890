package daemon

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// TestStreamQuota: a caller at its quota of open streams is refused with
// ResourceExhausted and a retry hint; a stream that ends gives its place
// back.
func TestStreamQuota(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.Quotas.Streams = 2 })
	var cancels []context.CancelFunc
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		cancels = append(cancels, cancel)
		if _, err := h.client.Watch(ctx, &sandboxdv1.WatchRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// A watch of no sessions sends nothing: wait until the daemon counts
	// both.
	for deadline := time.Now().Add(10 * time.Second); h.svc.quotas.usage("uid 0").streams != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon never counted the two watches")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := h.client.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st := wantCode(t, err, codes.ResourceExhausted, "--max-streams")
	hinted := false
	for _, d := range st.Details() {
		_, ok := d.(*errdetails.RetryInfo)
		hinted = hinted || ok
	}
	if !hinted {
		t.Errorf("refusal %v carries no RetryInfo", st)
	}
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := h.open(cmd("/bin/true")).finish()
		if s.err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused after a stream ended: %v", s.err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectionQuota: beyond its quota of connections a caller's new one
// is closed before it is served, and a closed one gives its place back.
func TestConnectionQuota(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.Quotas.Connections = 2 })
	// h.conn holds one; one more fits.
	if _, err := h.client.List(ctxT(t), &sandboxdv1.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	second := dialRaw(t, h.socket)
	if _, err := sandboxdv1grpc.NewSandboxdClient(second).List(ctxT(t), &sandboxdv1.ListRequest{}); err != nil {
		t.Fatalf("second connection: %v", err)
	}
	third := dialRaw(t, h.socket)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := sandboxdv1grpc.NewSandboxdClient(third).List(ctx, &sandboxdv1.ListRequest{}); err == nil {
		t.Fatal("a third connection was served with a quota of 2")
	}
	second.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dialRaw(t, h.socket)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := sandboxdv1grpc.NewSandboxdClient(c).List(ctx, &sandboxdv1.ListRequest{})
		cancel()
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused after a connection closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFirstMessageDeadline: a stream that never says what it is for is
// ended, not held.
func TestFirstMessageDeadline(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.FirstMessageTimeout = 100 * time.Millisecond })
	s, err := h.client.Session(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	wantCode(t, err, codes.DeadlineExceeded, "no Start or Attach within")
}

// TestEndedSessionsExpire: an ended session is kept for at most
// Config.RetainEndedFor, however few sessions its owner has.
func TestEndedSessionsExpire(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.RetainEndedFor = time.Second })
	id := h.open(cmd("/bin/true")).finish().started.GetSessionId()
	if _, err := h.svc.Inspect(context.Background(), Caller{}, id, false); err != nil {
		t.Fatalf("just ended: %v", err)
	}
	time.Sleep(1200 * time.Millisecond)
	if _, err := h.svc.Inspect(context.Background(), Caller{}, id, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("still kept past RetainEndedFor: %v", err)
	}
}

func dialRaw(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient("passthrough:///sandboxd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (q *quotas) usage(key string) usage {
	q.mu.Lock()
	defer q.mu.Unlock()
	if u := q.held[key]; u != nil {
		return *u
	}
	return usage{}
}

// TestIdleChecksAreBounded: however many sessions sit idle, their input
// checks together stay within idleChecksPerSecond.
func TestIdleChecksAreBounded(t *testing.T) {
	for _, n := range []int64{0, 1, 500, 1000, 100000} {
		d := slowestInputPoll(n)
		if d < inputPollMax {
			t.Errorf("%d sessions: every %v, faster than the slowest rate %v", n, d, inputPollMax)
		}
		if rate := float64(n) / d.Seconds(); rate > idleChecksPerSecond {
			t.Errorf("%d sessions checked every %v: %.0f checks a second, more than %d", n, d, rate, idleChecksPerSecond)
		}
	}
}
