package netproxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// checkNoLeaks fails t if, once every later cleanup has run, more
// goroutines are alive than when it was called. Call it first in a test.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d now, %d before the test\n%s", runtime.NumGoroutine(), base, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// harness is a proxy serving on 127.0.0.1 with its denials recorded.
type harness struct {
	t    *testing.T
	s    *Server
	addr string

	mu      sync.Mutex
	denials []*sandboxdv1.Denial
	served  chan error
}

func allow(host string, port int) *sandboxdv1.NetworkAllow {
	return &sandboxdv1.NetworkAllow{Host: host, Port: uint32(port)}
}

func loopback(names ...string) map[string][]netip.Addr {
	m := make(map[string][]netip.Addr)
	for _, n := range names {
		m[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return m
}

func startProxy(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, served: make(chan error, 1)}
	if cfg.OnDenial == nil {
		cfg.OnDenial = func(d *sandboxdv1.Denial) {
			h.mu.Lock()
			h.denials = append(h.denials, d)
			h.mu.Unlock()
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = l.Addr().String()
	h.s = New(cfg)
	go func() { h.served <- h.s.Serve(l) }()
	t.Cleanup(func() {
		h.s.Close()
		select {
		case err := <-h.served:
			if err != nil {
				t.Errorf("Serve returned %v after Close, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return h
}

// loopbackOnly lists only the loopback addresses as the daemon host's.
var loopbackOnly = hostAddrsOf("127.0.0.1/8", "::1/128")

func (h *harness) takeDenials() []*sandboxdv1.Denial {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.denials
	h.denials = nil
	return d
}

// dial connects to the proxy; the connection closes with the test.
func (h *harness) dial() net.Conn {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	h.t.Cleanup(func() { c.Close() })
	return c
}

// head is a response status line and header, read without a body.
type head struct {
	code   int
	status string
	header textproto.MIMEHeader
}

func readHead(t *testing.T, br *bufio.Reader) head {
	t.Helper()
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		t.Fatalf("reading status line: %v", err)
	}
	_, status, _ := strings.Cut(line, " ")
	code, err := strconv.Atoi(strings.SplitN(status, " ", 2)[0])
	if err != nil {
		t.Fatalf("status line %q: %v", line, err)
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("reading header: %v", err)
	}
	return head{code: code, status: status, header: hdr}
}

// connectHTTP sends CONNECT for hostport on a new connection and returns
// the connection, its reader, and the reply head.
func (h *harness) connectHTTP(hostport string) (net.Conn, *bufio.Reader, head) {
	h.t.Helper()
	c := h.dial()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	return c, br, readHead(h.t, br)
}

// socks5 performs a no-auth SOCKS5 CONNECT to the given address (atyp and
// address bytes as on the wire) and returns the reply code.
func (h *harness) socks5(atyp byte, addr []byte, port uint16) (net.Conn, *bufio.Reader, byte) {
	h.t.Helper()
	c := h.dial()
	br := bufio.NewReader(c)
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		h.t.Fatal(err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(br, sel[:]); err != nil || sel != [2]byte{5, 0} {
		h.t.Fatalf("method selection: %v %v", sel, err)
	}
	req := []byte{5, 1, 0, atyp}
	if atyp == socksAtypDomain {
		req = append(req, byte(len(addr)))
	}
	req = append(req, addr...)
	req = binary.BigEndian.AppendUint16(req, port)
	if _, err := c.Write(req); err != nil {
		h.t.Fatal(err)
	}
	return c, br, readSOCKSReply(h.t, br)
}

func readSOCKSReply(t *testing.T, br *bufio.Reader) byte {
	t.Helper()
	var rep [4]byte
	if _, err := io.ReadFull(br, rep[:]); err != nil {
		t.Fatalf("reading SOCKS reply: %v", err)
	}
	if rep[0] != 5 || rep[2] != 0 {
		t.Fatalf("SOCKS reply header % x", rep)
	}
	n := 4
	if rep[3] == socksAtypIPv6 {
		n = 16
	} else if rep[3] != socksAtypIPv4 {
		t.Fatalf("SOCKS reply address type %d", rep[3])
	}
	if _, err := io.ReadFull(br, make([]byte, n+2)); err != nil {
		t.Fatalf("reading SOCKS reply address: %v", err)
	}
	return rep[1]
}

// startEcho serves TCP echo on addr ("127.0.0.1:0" or "[::1]:0") and
// passes a client's half-close back to it.
func startEcho(t *testing.T, addr string) (net.Listener, int) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l, l.Addr().(*net.TCPAddr).Port
}

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// echoes checks that a tunnel carries bytes both ways.
func echoes(t *testing.T, c net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatalf("writing through tunnel: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatalf("reading through tunnel: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("tunnel echoed %q, want %q", got, msg)
	}
}

// expectClosed checks that the proxy closes c without sending more.
func expectClosed(t *testing.T, br io.Reader) {
	t.Helper()
	b, err := io.ReadAll(br)
	if len(b) > 0 {
		t.Fatalf("read %q after the answer, want the connection closed", b)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("waiting for close: %v", err)
	}
}

// fakeResolver answers from a table of names without their trailing dot,
// and records every name asked. It refuses a name of several labels that
// is not rooted: the proxy must never let a search domain of resolv.conf
// apply to it.
// setHostAddrs makes list the listing of the daemon host's addresses for
// the test, so that the addresses a test resolves names to are never the
// host's (on a host whose interface is in 192.0.2.0/24, say).
func setHostAddrs(t testing.TB, list func() ([]net.Addr, error)) {
	saved := hostAddrs
	hostAddrs = &addrCache{list: list, ttl: time.Hour}
	t.Cleanup(func() { hostAddrs = saved })
}

// hostAddrsOf lists addrs (prefixes) as the daemon host's.
func hostAddrsOf(addrs ...string) func() ([]net.Addr, error) {
	return func() ([]net.Addr, error) {
		var l []net.Addr
		for _, a := range addrs {
			p := netip.MustParsePrefix(a)
			l = append(l, &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
		}
		return l, nil
	}
}

type fakeResolver struct {
	mu    sync.Mutex
	table map[string][]netip.Addr
	asked []string
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if network != "ip" {
		return nil, fmt.Errorf("fake resolver: network %q", network)
	}
	if strings.Contains(strings.TrimSuffix(host, "."), ".") != strings.HasSuffix(host, ".") {
		return nil, fmt.Errorf("fake resolver: %q is rooted only if it has several labels", host)
	}
	addrs, ok := r.table[strings.TrimSuffix(host, ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func (r *fakeResolver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// dialRecorder is a Config.Dial that records addresses and dials them for
// real unless fail says otherwise.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
	fail  func(addr string) error
}

func (d *dialRecorder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	if d.fail != nil {
		if err := d.fail(addr); err != nil {
			return nil, err
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *dialRecorder) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

func readAllBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

func fdList() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+l)
	}
	return strings.Join(out, "\n")
}

// openFDs counts this process's open descriptors, or -1 where /proc is not.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
