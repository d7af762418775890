package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/netproxy"
)

// proxyBackend is a fakeBackend that serves each sandbox's proxy on a
// listener of the test's, whose address it hands out.
type proxyBackend struct {
	*fakeBackend
	proxies chan string
}

func (b *proxyBackend) Needs() launcher.Needs { return launcher.Needs{Proxy: true} }

func (b *proxyBackend) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p, err := b.fakeBackend.Start(ctx, spec)
	if err != nil {
		l.Close()
		return nil, err
	}
	go spec.Proxy(l)
	b.proxies <- l.Addr().String()
	return &proxyProcess{Process: p, l: l}, nil
}

type proxyProcess struct {
	launcher.Process
	l net.Listener
}

func (p *proxyProcess) Wait() (launcher.Status, error) {
	st, err := p.Process.Wait()
	p.l.Close()
	return st, err
}

// startStream is a Session stream that sends one Start and then waits.
type startStream struct {
	ctx   context.Context
	start *sandboxdv1.Start
	sent  bool
}

func (s *startStream) Context() context.Context               { return s.ctx }
func (s *startStream) Send(*sandboxdv1.SessionResponse) error { return nil }
func (s *startStream) Recv() (*sandboxdv1.SessionRequest, error) {
	if !s.sent {
		s.sent = true
		return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: s.start}}, nil
	}
	<-s.ctx.Done()
	return nil, io.EOF
}

// The proxies of one caller's sessions share its budget of connections to
// the outside: beyond it a tunnel is refused, as a denial naming the
// quota, while another caller still gets one.
func TestProxyConnectionsAreBudgetedPerCaller(t *testing.T) {
	origin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer origin.Close()
	go func() {
		for {
			c, err := origin.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	port := origin.Addr().(*net.TCPAddr).Port
	target := "127.0.0.1:" + strconv.Itoa(port)

	b := &proxyBackend{fakeBackend: &fakeBackend{}, proxies: make(chan string, 4)}
	h := startDaemon(t, func(c *Config) {
		c.Backend = b
		c.Quotas.ProxyConnections = 2
		c.ProxyConnections = 8
	})
	start := func(uid uint32) string {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		t.Cleanup(func() { cancel(); <-done })
		st := &startStream{ctx: ctx, start: &sandboxdv1.Start{
			Command: &sandboxdv1.Command{Argv: []string{"/bin/sleep", "30"}},
			Policy: &sandboxdv1.Policy{Network: &sandboxdv1.Network{
				Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{{Host: "127.0.0.1", Port: uint32(port)}},
			}},
		}}
		go func() {
			defer close(done)
			h.svc.Session(Caller{UID: uid, GID: uid, PID: 1}, st)
		}()
		select {
		case addr := <-b.proxies:
			return addr
		case <-time.After(10 * time.Second):
			t.Fatalf("uid %d's session did not start", uid)
			return ""
		}
	}
	tunnel := func(proxy string) (int, string) {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get(netproxy.DeniedHeader)
	}

	a, a2, other := start(4242), start(4242), start(4343)
	for _, p := range []string{a, a2} {
		if code, why := tunnel(p); code != 200 {
			t.Fatalf("uid 4242 within its budget: %d %s", code, why)
		}
	}
	code, why := tunnel(a2)
	if code != 503 || !strings.Contains(why, "2 connections to the outside uid 4242's sessions may hold open together") {
		t.Errorf("uid 4242 beyond its budget: %d %q", code, why)
	}
	if code, why := tunnel(other); code != 200 {
		t.Errorf("uid 4343 beside uid 4242 at its budget: %d %s", code, why)
	}
	var denied []string
	for _, s := range h.svc.List(context.Background(), Caller{}) {
		for _, d := range s.GetRecentDenials() {
			denied = append(denied, d.GetField())
		}
	}
	if strings.Join(denied, " ") != "quota.max-proxy-connections" {
		t.Errorf("denials of fields %q, want one of quota.max-proxy-connections", denied)
	}
}
