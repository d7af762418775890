package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/url"
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

// origin is an HTTP server on 127.0.0.1 that says what it received.
type origin struct {
	*httptest.Server
	port int

	mu   sync.Mutex
	seen []*http.Request
}

func startOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	o.port = o.Listener.Addr().(*net.TCPAddr).Port
	t.Cleanup(o.Close)
	return o
}

func (o *origin) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.seen = append(o.seen, r)
	o.mu.Unlock()
	switch r.URL.Path {
	case "/echo":
		io.Copy(w, r.Body)
	case "/big":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		rnd := rand.NewChaCha8([32]byte{1})
		io.CopyN(w, rnd, int64(n))
	case "/chunks":
		for i := range 3 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
	default:
		fmt.Fprintf(w, "host=%s uri=%s", r.Host, r.RequestURI)
	}
}

func (o *origin) last() *http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		return nil
	}
	return o.seen[len(o.seen)-1]
}

func TestConnectToAllowedHostTunnelsBothWaysWithHalfClose(t *testing.T) {
	checkNoLeaks(t)
	_, port := startEcho(t, "127.0.0.1:0")
	h := startProxy(t, Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", port)},
		Pinned: loopback("allowed.test"),
	})
	c, br, hd := h.connectHTTP(fmt.Sprintf("allowed.test:%d", port))
	if hd.code != 200 || hd.status != "200 Connection established" {
		t.Fatalf("CONNECT answered %q", hd.status)
	}
	echoes(t, c, br, "ping")
	// Bytes sent right behind the head, before the answer, must arrive too.
	c2 := h.dial()
	fmt.Fprintf(c2, "CONNECT ALLOWED.test.:%d HTTP/1.1\r\n\r\nearly", port)
	br2 := bufio.NewReader(c2)
	if hd := readHead(t, br2); hd.code != 200 {
		t.Fatalf("CONNECT with a mixed-case, dotted name answered %q", hd.status)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(br2, got); err != nil || string(got) != "early" {
		t.Fatalf("pipelined bytes came back as %q, %v", got, err)
	}
	// The origin sees our half-close and answers it with its own.
	io.WriteString(c, "last")
	c.(*net.TCPConn).CloseWrite()
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "last" {
		t.Fatalf("after half-close read %q, %v; want \"last\" then EOF", rest, err)
	}
	if d := h.takeDenials(); len(d) != 0 {
		t.Fatalf("denials for allowed targets: %v", d)
	}
}

func TestForwardAllowedRequestsKeepAliveAndRefuseTheDeniedOne(t *testing.T) {
	checkNoLeaks(t)
	o := startOrigin(t)
	h := startProxy(t, Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", o.port)},
		Pinned: loopback("allowed.test", "other.test"),
	})
	c := h.dial()
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET http://allowed.test:%d/one?q=1 HTTP/1.1\r\nHost: evil.test\r\n"+
		"Connection: X-Secret-Hop\r\nX-Secret-Hop: 1\r\nProxy-Authorization: Basic eDp5\r\n"+
		"Proxy-Connection: keep-alive\r\nKeep-Alive: 300\r\nUpgrade: websocket\r\nTE: trailers\r\nX-Kept: yes\r\n\r\n", o.port)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("host=allowed.test:%d uri=/one?q=1", o.port)
	if body := readAllBody(t, resp); resp.StatusCode != 200 || body != want {
		t.Fatalf("first request: %s %q, want 200 %q", resp.Status, body, want)
	}
	if resp.Close {
		t.Fatalf("first response closes the connection; want keep-alive")
	}
	r := o.last()
	if v := r.Header["Connection"]; len(v) != 1 || v[0] != "close" {
		t.Errorf("origin received Connection: %q, want only the proxy's own close", v)
	}
	for _, k := range []string{"X-Secret-Hop", "Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "Upgrade", "Te"} {
		if v, ok := r.Header[k]; ok {
			t.Errorf("origin received hop-by-hop header %s: %q", k, v)
		}
	}
	if r.Header.Get("X-Kept") != "yes" {
		t.Errorf("origin did not receive X-Kept; header %v", r.Header)
	}
	if ua := r.Header.Get("User-Agent"); ua != "" {
		t.Errorf("proxy added User-Agent %q", ua)
	}

	fmt.Fprintf(c, "GET http://other.test:%d/two HTTP/1.1\r\nHost: other.test\r\n\r\n", o.port)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("other.test:%d", o.port)
	body := readAllBody(t, resp)
	if resp.StatusCode != 403 ||
		resp.Header.Get(DeniedHeader) != target+" not in network.allow" ||
		body != target+" not in network.allow (sandboxd network.allow)\n" ||
		!resp.Close || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("denied request: %s %v %q", resp.Status, resp.Header, body)
	}
	expectClosed(t, br)
	if r := o.last(); r.URL.Path == "/two" {
		t.Fatalf("the denied request reached the origin")
	}

	ds := h.takeDenials()
	if len(ds) != 1 {
		t.Fatalf("denials: %v, want one", ds)
	}
	d := ds[0]
	if d.Field != "network.allow" || d.Operation != "http" || d.Target != target || d.Errno != "EACCES" || d.Detail != "not in network.allow" {
		t.Errorf("denial %v", d)
	}
	if age := time.Since(d.GetTime().AsTime()); age < 0 || age > time.Minute {
		t.Errorf("denial time %v is %v old", d.GetTime().AsTime(), age)
	}
}

func TestForwardThroughNetHTTPStreamsLargeBodiesBothWays(t *testing.T) {
	checkNoLeaks(t)
	o := startOrigin(t)
	h := startProxy(t, Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", o.port)},
		Pinned: loopback("allowed.test"),
	})
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}), ExpectContinueTimeout: 20 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := fmt.Sprintf("http://allowed.test:%d", o.port)

	// Chunked upload (unknown length) echoed back; sent with Expect:
	// 100-continue, which only finishes fast if the proxy relays the 100.
	payload := make([]byte, 8<<20+123)
	rand.NewChaCha8([32]byte{2}).Read(payload)
	start := time.Now()
	req, _ := http.NewRequest("POST", base+"/echo", io.MultiReader(bytes.NewReader(payload)))
	req.Header.Set("Expect", "100-continue")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := readAllBody(t, resp)
	if resp.StatusCode != 200 || sha256.Sum256([]byte(got)) != sha256.Sum256(payload) {
		t.Fatalf("echo of %d bytes: %s, %d bytes back", len(payload), resp.Status, len(got))
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("upload with Expect: 100-continue took %v: the 100 was not relayed", time.Since(start))
	}

	// A sized upload, then a large sized download, on the kept connection.
	req, _ = http.NewRequest("PUT", base+"/echo", bytes.NewReader(payload[:1<<20]))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllBody(t, resp); len(got) != 1<<20 {
		t.Fatalf("sized echo returned %d bytes", len(got))
	}
	var reused bool
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
	req, _ = http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", base+"/big?n="+strconv.Itoa(32<<20), nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !reused {
		t.Errorf("the request after a sized upload did not reuse the proxy connection")
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != 32<<20 || resp.ContentLength != 32<<20 {
		t.Fatalf("download: %d bytes (length %d), %v", n, resp.ContentLength, err)
	}
	resp, err = client.Head(base + "/big?n=77")
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != 77 {
		t.Fatalf("HEAD: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestForwardStreamsAResponseBeforeItEnds(t *testing.T) {
	checkNoLeaks(t)
	release := make(chan struct{})
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first;")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second")
	}))
	t.Cleanup(o.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	port := o.Listener.Addr().(*net.TCPAddr).Port
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)}, Pinned: loopback("allowed.test")})
	c := h.dial()
	fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("first;"))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("first part did not arrive while the origin was still sending: %v", err)
	}
	close(release)
	if rest := readAllBody(t, resp); rest != "second" {
		t.Fatalf("rest of body %q", rest)
	}
}

func TestForwardToHTTP10ClientUnchunksAndCloses(t *testing.T) {
	checkNoLeaks(t)
	o := startOrigin(t)
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)}, Pinned: loopback("allowed.test")})
	c := h.dial()
	fmt.Fprintf(c, "GET http://allowed.test:%d/chunks HTTP/1.0\r\n\r\n", o.port)
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAllBody(t, resp); body != "part0;part1;part2;" || len(resp.TransferEncoding) != 0 {
		t.Fatalf("HTTP/1.0 client got %q, transfer-encoding %v:\n%s", body, resp.TransferEncoding, raw)
	}
}

func TestForwardStripsHopByHopResponseHeaders(t *testing.T) {
	checkNoLeaks(t)
	// A raw origin: net/http's server would not send these headers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Resp-Hop, close\r\nX-Resp-Hop: 1\r\n"+
			"Proxy-Authenticate: Basic\r\nKeep-Alive: timeout=5\r\nX-Resp-Kept: 1\r\nContent-Length: 3\r\n\r\nhop")
	}()
	t.Cleanup(func() { l.Close(); <-done })
	port := l.Addr().(*net.TCPAddr).Port
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)}, Pinned: loopback("allowed.test")})
	c := h.dial()
	fmt.Fprintf(c, "GET http://allowed.test:%d/hop HTTP/1.1\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAllBody(t, resp); body != "hop" {
		t.Fatalf("body %q", body)
	}
	for _, k := range []string{"X-Resp-Hop", "Proxy-Authenticate", "Keep-Alive", "Connection"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("client received hop-by-hop header %s: %q", k, v)
		}
	}
	if resp.Header.Get("X-Resp-Kept") != "1" || resp.Close {
		t.Fatalf("response header %v, close %v: want X-Resp-Kept and a kept connection", resp.Header, resp.Close)
	}
}

func TestSOCKS5ReachesAllowedTargetsByNameIPv4AndIPv6(t *testing.T) {
	checkNoLeaks(t)
	_, port := startEcho(t, "127.0.0.1:0")
	cfg := Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", port), allow("127.0.0.1", port)},
		Pinned: loopback("allowed.test"),
	}
	l6, err := net.Listen("tcp", "[::1]:0")
	port6 := 0
	if err == nil {
		l6.Close()
		_, port6 = startEcho(t, "[::1]:0")
		cfg.Allow = append(cfg.Allow, allow("::1", port6))
	}
	h := startProxy(t, cfg)

	c, br, rep := h.socks5(socksAtypDomain, []byte("allowed.test"), uint16(port))
	if rep != socksSucceeded {
		t.Fatalf("domain: reply %#x", rep)
	}
	echoes(t, c, br, "by name")
	c, br, rep = h.socks5(socksAtypIPv4, []byte{127, 0, 0, 1}, uint16(port))
	if rep != socksSucceeded {
		t.Fatalf("IPv4: reply %#x", rep)
	}
	echoes(t, c, br, "by IPv4")
	if port6 == 0 {
		t.Skipf("no IPv6 loopback on this host (%v): the SOCKS5 IPv6 address type is untested", err)
	}
	c, br, rep = h.socks5(socksAtypIPv6, netip.IPv6Loopback().AsSlice(), uint16(port6))
	if rep != socksSucceeded {
		t.Fatalf("IPv6: reply %#x", rep)
	}
	echoes(t, c, br, "by IPv6")
}

func TestSOCKS5DeniedTargetGetsRulesetReplyAndDenial(t *testing.T) {
	checkNoLeaks(t)
	_, port := startEcho(t, "127.0.0.1:0")
	rec := &dialRecorder{}
	h := startProxy(t, Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", port)},
		Pinned: loopback("allowed.test", "other.test"),
		Dial:   rec.Dial,
	})
	for _, tc := range []struct {
		atyp   byte
		addr   []byte
		target string
	}{
		{socksAtypDomain, []byte("other.test"), fmt.Sprintf("other.test:%d", port)},
		{socksAtypIPv4, []byte{127, 0, 0, 1}, fmt.Sprintf("127.0.0.1:%d", port)},
		{socksAtypIPv6, netip.IPv6Loopback().AsSlice(), fmt.Sprintf("[::1]:%d", port)},
	} {
		c, br, rep := h.socks5(tc.atyp, tc.addr, uint16(port))
		if rep != socksNotAllowed {
			t.Errorf("%s: reply %#x, want %#x", tc.target, rep, socksNotAllowed)
		}
		expectClosed(t, br)
		c.Close()
		ds := h.takeDenials()
		if len(ds) != 1 || ds[0].Operation != "connect" || ds[0].Target != tc.target || ds[0].Field != "network.allow" ||
			ds[0].Errno != "EACCES" || ds[0].Detail != "not in network.allow" {
			t.Errorf("%s: denials %v", tc.target, ds)
		}
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("denied targets were dialed: %v", d)
	}
}

func TestConnectDeniedTargetGets403AndDenial(t *testing.T) {
	checkNoLeaks(t)
	h := startProxy(t, Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", 443)},
		Pinned: loopback("allowed.test", "other.test"),
	})
	_, br, hd := h.connectHTTP("other.test:443")
	if hd.code != 403 || hd.header.Get(DeniedHeader) != "other.test:443 not in network.allow" || hd.header.Get("Connection") != "close" {
		t.Fatalf("CONNECT other.test: %q %v", hd.status, hd.header)
	}
	body := make([]byte, len("other.test:443 not in network.allow (sandboxd network.allow)\n"))
	io.ReadFull(br, body)
	if string(body) != "other.test:443 not in network.allow (sandboxd network.allow)\n" {
		t.Fatalf("body %q", body)
	}
	expectClosed(t, br)
	ds := h.takeDenials()
	if len(ds) != 1 || ds[0].Operation != "connect" || ds[0].Target != "other.test:443" {
		t.Fatalf("denials %v", ds)
	}
}

func TestWildcardAndPortRules(t *testing.T) {
	checkNoLeaks(t)
	_, port := startEcho(t, "127.0.0.1:0")
	_, anyPort := startEcho(t, "127.0.0.1:0")
	h := startProxy(t, Config{
		Allow: []*sandboxdv1.NetworkAllow{
			allow("*.allowed.test", port),
			allow("anyport.test", 0),
		},
		Pinned: loopback("allowed.test", "a.allowed.test", "b.c.allowed.test", "xallowed.test", "anyport.test"),
	})
	for _, tc := range []struct {
		hostport string
		ok       bool
	}{
		{fmt.Sprintf("a.allowed.test:%d", port), true},
		{fmt.Sprintf("b.c.allowed.test:%d", port), true},
		{fmt.Sprintf("allowed.test:%d", port), false},  // a wildcard never admits its apex
		{fmt.Sprintf("xallowed.test:%d", port), false}, // nor a name merely ending the same
		{fmt.Sprintf("a.allowed.test:%d", anyPort), false},
		{fmt.Sprintf("anyport.test:%d", port), true},
		{fmt.Sprintf("anyport.test:%d", anyPort), true},
	} {
		c, br, hd := h.connectHTTP(tc.hostport)
		if got := hd.code == 200; got != tc.ok {
			t.Errorf("CONNECT %s: %q, want allowed=%v", tc.hostport, hd.status, tc.ok)
			continue
		}
		if tc.ok {
			echoes(t, c, br, "x")
		}
	}
}

func TestAllowedMatchesPortsAsTheRuleSays(t *testing.T) {
	s := New(Config{Allow: []*sandboxdv1.NetworkAllow{allow("a.test", 8080), allow("b.test", 0), allow("::ffff:10.0.0.1", 22), allow("10.0.0.2", 22)}})
	for _, tc := range []struct {
		host string
		port string
		ok   bool
	}{
		{"a.test", "8080", true},
		{"a.test", "8081", false},
		{"A.Test.", "8080", true},
		{"b.test", "1", true},
		{"b.test", "65535", true},
		{"10.0.0.1", "22", true},
		{"::ffff:10.0.0.1", "22", true},
		{"::ffff:10.0.0.2", "22", true},
		{"10.0.0.2", "23", false},
		{"0:0:0:0:0:ffff:a00:2", "22", true},
	} {
		tg, err := parseTarget(tc.host, tc.port)
		if err != nil {
			t.Fatalf("%s:%s: %v", tc.host, tc.port, err)
		}
		if got := s.allowed(tg); got != tc.ok {
			t.Errorf("allowed(%s:%s) = %v, want %v", tc.host, tc.port, got, tc.ok)
		}
	}
}

func TestIPv6LiteralAllowsOnlyThatAddress(t *testing.T) {
	checkNoLeaks(t)
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on this host: %v", err)
	}
	l.Close()
	_, port := startEcho(t, "[::1]:0")
	// Something on 127.0.0.1 at the same port, so a refusal is the proxy's.
	l4, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err == nil {
		t.Cleanup(func() { l4.Close() })
	}
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("::1", port)}})
	for _, hp := range []string{fmt.Sprintf("[::1]:%d", port), fmt.Sprintf("[0:0::0:1]:%d", port)} {
		c, br, hd := h.connectHTTP(hp)
		if hd.code != 200 {
			t.Fatalf("CONNECT %s: %q", hp, hd.status)
		}
		echoes(t, c, br, "v6")
	}
	_, _, hd := h.connectHTTP(fmt.Sprintf("127.0.0.1:%d", port))
	if hd.code != 403 || hd.header.Get(DeniedHeader) != fmt.Sprintf("127.0.0.1:%d not in network.allow", port) {
		t.Fatalf("CONNECT 127.0.0.1: %q %v", hd.status, hd.header)
	}
	_, _, hd = h.connectHTTP(fmt.Sprintf("[::1%%25lo]:%d", port))
	if hd.code != 400 {
		t.Fatalf("CONNECT with a zone: %q", hd.status)
	}
	ds := h.takeDenials()
	if len(ds) != 2 || ds[0].Target != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Fatalf("denials %v", ds)
	}
}

func TestNamesResolvingToHostInternalAddressesAreRefused(t *testing.T) {
	checkNoLeaks(t)
	setHostAddrs(t, loopbackOnly)
	_, port := startEcho(t, "127.0.0.1:0")
	res := &fakeResolver{table: map[string][]netip.Addr{
		"rebind.test":  {netip.MustParseAddr("127.0.0.1")},
		"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":   {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
		"mapped.test":  {netip.MustParseAddr("::ffff:127.0.0.2")},
		"zero.test":    {netip.MustParseAddr("0.0.0.0")},
		"v6ll.test":    {netip.MustParseAddr("fe80::1")},
		"mcast.test":   {netip.MustParseAddr("224.0.0.1")},
		"private.test": {netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("fd00::7")},
	}}
	rec := &dialRecorder{fail: func(addr string) error {
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			return errors.New("test dialer: not dialing out")
		}
		return nil
	}}
	h := startProxy(t, Config{
		Allow:    []*sandboxdv1.NetworkAllow{allow("*.test", 0)},
		Pinned:   loopback("pinned.test"),
		Resolver: res,
		Dial:     rec.Dial,
	})
	for _, tc := range []struct{ name, detail string }{
		{"rebind.test", "resolves to loopback address 127.0.0.1"},
		{"meta.test", "resolves to link-local address 169.254.169.254"},
		{"mixed.test", "resolves to loopback address 127.0.0.1"},
		{"mapped.test", "resolves to loopback address 127.0.0.2"},
		{"zero.test", "resolves to unspecified address 0.0.0.0"},
		{"v6ll.test", "resolves to link-local address fe80::1"},
		{"mcast.test", "resolves to link-local multicast address 224.0.0.1"},
	} {
		target := fmt.Sprintf("%s:%d", tc.name, port)
		_, _, hd := h.connectHTTP(target)
		if hd.code != 403 || hd.header.Get(DeniedHeader) != target+" "+tc.detail {
			t.Errorf("CONNECT %s: %q %v", target, hd.status, hd.header)
		}
		_, _, rep := h.socks5(socksAtypDomain, []byte(tc.name), uint16(port))
		if rep != socksNotAllowed {
			t.Errorf("SOCKS %s: reply %#x", target, rep)
		}
		ds := h.takeDenials()
		if len(ds) != 2 || ds[0].Detail != tc.detail || ds[0].Target != target || ds[1].Detail != tc.detail {
			t.Errorf("%s: denials %v", tc.name, ds)
		}
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("refused names were dialed: %v", d)
	}

	// Pinned names are the operator's word and may be loopback.
	c, br, hd := h.connectHTTP(fmt.Sprintf("pinned.test:%d", port))
	if hd.code != 200 {
		t.Fatalf("pinned name: %q", hd.status)
	}
	echoes(t, c, br, "pinned")

	// Private ranges are allowed; every address is tried in order.
	_, _, hd = h.connectHTTP(fmt.Sprintf("private.test:%d", port))
	if hd.code != 502 {
		t.Fatalf("private.test: %q, want 502 from the test dialer", hd.status)
	}
	want := []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("10.0.0.7:%d", port), fmt.Sprintf("[fd00::7]:%d", port)}
	if got := rec.dialed(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("dialed %v, want %v", got, want)
	}
}

func TestNamesAreLookedUpRooted(t *testing.T) {
	checkNoLeaks(t)
	setHostAddrs(t, loopbackOnly)
	res := &fakeResolver{table: map[string][]netip.Addr{"api.example.test": {netip.MustParseAddr("192.0.2.1")}, "registry": {netip.MustParseAddr("198.51.100.2")}}}
	rec := &dialRecorder{fail: func(string) error { return errors.New("test dialer: not dialing out") }}
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("api.example.test", 0), allow("registry", 0)}, Resolver: res, Dial: rec.Dial})
	h.connectHTTP("api.example.test.:443")
	h.socks5(socksAtypDomain, []byte("API.example.test"), 443)
	// A single label stays the host's short name, as the hosts file and
	// the search list have it.
	h.connectHTTP("registry:443")
	if got := res.names(); strings.Join(got, " ") != "api.example.test. api.example.test. registry" {
		t.Fatalf("looked up %q, want the rooted name twice, then the short one", got)
	}
	if got := rec.dialed(); strings.Join(got, " ") != "192.0.2.1:443 192.0.2.1:443 198.51.100.2:443" {
		t.Fatalf("dialed %v", got)
	}
}

func TestNamesResolvingToTheHostsOwnAddressesAreRefused(t *testing.T) {
	checkNoLeaks(t)
	var own netip.Addr
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, na := range ifaddrs {
		if p, err := netip.ParsePrefix(na.String()); err == nil && internalKind(p.Addr(), netip.Prefix{}) == "" {
			own = p.Addr()
			break
		}
	}
	if !own.IsValid() {
		t.Skip("this host has no address outside the loopback and link-local ranges")
	}
	res := &fakeResolver{table: map[string][]netip.Addr{"self.test": {own}}}
	rec := &dialRecorder{}
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("self.test", 0)}, Resolver: res, Dial: rec.Dial})
	target := "self.test:22"
	detail := fmt.Sprintf("resolves to the daemon host's own address %s", own)
	_, _, hd := h.connectHTTP(target)
	if hd.code != 403 || hd.header.Get(DeniedHeader) != target+" "+detail {
		t.Errorf("CONNECT %s: %q %v", target, hd.status, hd.header)
	}
	if ds := h.takeDenials(); len(ds) != 1 || ds[0].Detail != detail {
		t.Errorf("denials %v", ds)
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("the host's own address was dialed: %v", d)
	}
}

func TestNamesResolvingToNAT64OfTheHostsOwnAddressesAreRefused(t *testing.T) {
	checkNoLeaks(t)
	setHostAddrs(t, hostAddrsOf("10.0.0.1/8", "2001:db8::5/64"))
	table := map[string][]netip.Addr{}
	var refused []string
	for i, prefix := range []string{"64:ff9b::/96", "64:ff9b:1::/48", "64:ff9b:1::/56", "64:ff9b:1::/64", "64:ff9b:1::/96"} {
		own, other := fmt.Sprintf("own%d.test", i), fmt.Sprintf("other%d.test", i)
		table[own] = []netip.Addr{nat64Embed(prefix, "10.0.0.1")}
		table[other] = []netip.Addr{nat64Embed(prefix, "10.0.0.2")}
		refused = append(refused, own)
	}
	// A /48 embedding with its suffix set, which translators ignore.
	table["own-suffix.test"] = []netip.Addr{netip.MustParseAddr("64:ff9b:1:a00:0:100:0:1")}
	refused = append(refused, "own-suffix.test")
	rec := &dialRecorder{fail: func(string) error { return errors.New("test dialer: not dialing out") }}
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("*.test", 0)}, Resolver: &fakeResolver{table: table}, Dial: rec.Dial})
	for _, name := range refused {
		target := name + ":443"
		detail := fmt.Sprintf("resolves to NAT64 address %s of the daemon host's own address 10.0.0.1", table[name][0])
		if _, _, hd := h.connectHTTP(target); hd.code != 403 || hd.header.Get(DeniedHeader) != target+" "+detail {
			t.Errorf("CONNECT %s: %q %v", target, hd.status, hd.header)
		}
		if ds := h.takeDenials(); len(ds) != 1 || ds[0].Detail != detail {
			t.Errorf("%s: denials %v", name, ds)
		}
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("the host's own address was dialed through NAT64: %v", d)
	}
	for i := range refused[:len(refused)-1] {
		name := fmt.Sprintf("other%d.test", i)
		if _, _, hd := h.connectHTTP(name + ":443"); hd.code != 502 {
			t.Errorf("%s: %q, want 502 from the test dialer", name, hd.status)
		}
	}
	if d := rec.dialed(); len(d) != len(refused)-1 {
		t.Fatalf("dialed %v, want one address of each other name", d)
	}
}

func TestAFailedListingOfTheHostsAddressesIsTheProxysFailure(t *testing.T) {
	checkNoLeaks(t)
	setHostAddrs(t, func() ([]net.Addr, error) { return nil, syscall.EMFILE })
	res := &fakeResolver{table: map[string][]netip.Addr{
		"listed.test": {netip.MustParseAddr("93.184.216.34")},
		"mixed.test":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
	}}
	rec := &dialRecorder{}
	var mu sync.Mutex
	var logged []string
	h := startProxy(t, Config{
		Allow:    []*sandboxdv1.NetworkAllow{allow("listed.test", 0), allow("mixed.test", 0)},
		Resolver: res,
		Dial:     rec.Dial,
		Logf: func(format string, args ...any) {
			mu.Lock()
			logged = append(logged, fmt.Sprintf(format, args...))
			mu.Unlock()
		},
	})
	_, br, hd := h.connectHTTP("listed.test:443")
	body, _ := io.ReadAll(br)
	if hd.code != 503 || hd.header.Get(DeniedHeader) != "" || !strings.Contains(string(body), "too many open files") {
		t.Errorf("CONNECT: %q %v %q", hd.status, hd.header, body)
	}
	if _, _, rep := h.socks5(socksAtypDomain, []byte("listed.test"), 443); rep != socksFailure {
		t.Errorf("SOCKS: reply %#x, want %#x", rep, socksFailure)
	}
	c := h.dial()
	fmt.Fprintf(c, "GET http://listed.test/ HTTP/1.1\r\nHost: listed.test\r\n\r\n")
	if hd := readHead(t, bufio.NewReader(c)); hd.code != 503 {
		t.Errorf("GET: %q", hd.status)
	}
	if ds := h.takeDenials(); len(ds) != 0 {
		t.Errorf("the proxy's own failure made denials: %v", ds)
	}
	// A rebinding refusal is not hidden behind the failure to list.
	if _, _, hd := h.connectHTTP("mixed.test:443"); hd.code != 403 {
		t.Errorf("CONNECT mixed.test: %q, want 403", hd.status)
	}
	if ds := h.takeDenials(); len(ds) != 1 || !strings.Contains(ds[0].Detail, "loopback") {
		t.Errorf("mixed.test: denials %v, want the loopback one", ds)
	}
	mu.Lock()
	defer mu.Unlock()
	// Within checkLogEvery, one line for the three.
	if len(logged) != 1 || !strings.Contains(logged[0], "listed.test:443") || !strings.Contains(logged[0], "too many open files") {
		t.Errorf("logged %q, want the first refusal", logged)
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("dialed %v with the host's addresses unknown", d)
	}
}

func TestAddrCacheRefreshesAndFailsClosed(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7")
	listed := []net.Addr{&net.IPNet{IP: net.ParseIP("192.0.2.7"), Mask: net.CIDRMask(24, 32)}}
	var fail error
	calls := 0
	c := &addrCache{ttl: time.Hour, list: func() ([]net.Addr, error) {
		calls++
		return listed, fail
	}}
	if own, err := c.has(netip.MustParseAddr("::ffff:192.0.2.7")); !own || err != nil {
		t.Fatalf("has(%s) = %v, %v", a, own, err)
	}
	listed = []net.Addr{&net.IPNet{IP: net.ParseIP("2001:db8::7"), Mask: net.CIDRMask(64, 128)}}
	if own, _ := c.has(b); own || calls != 1 {
		t.Fatalf("within the ttl: has(%s) = %v after %d listings", b, own, calls)
	}
	c.at = c.at.Add(-2 * time.Hour)
	if own, _ := c.has(b); !own || calls != 2 {
		t.Fatalf("past the ttl: has(%s) = %v after %d listings", b, own, calls)
	}
	c.at = c.at.Add(-2 * time.Hour)
	fail = errors.New("netlink: no")
	if _, err := c.has(b); err == nil {
		t.Fatal("a failed listing was not reported")
	}
}

func TestRefusedNamesAreNeverLookedUp(t *testing.T) {
	checkNoLeaks(t)
	res := &fakeResolver{table: map[string][]netip.Addr{"secret-data.exfil.test": {netip.MustParseAddr("192.0.2.1")}}}
	h := startProxy(t, Config{Allow: []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)}, Resolver: res})
	h.connectHTTP("secret-data.exfil.test:443")
	h.socks5(socksAtypDomain, []byte("secret-data.exfil.test"), 443)
	c := h.dial()
	fmt.Fprintf(c, "GET http://secret-data.exfil.test/ HTTP/1.1\r\n\r\n")
	io.ReadAll(c)
	if n := res.names(); len(n) != 0 {
		t.Fatalf("refused names were resolved: %v", n)
	}
	if ds := h.takeDenials(); len(ds) != 3 {
		t.Fatalf("denials %v, want 3", ds)
	}
}

func TestUpstreamFailuresGetGatewayErrors(t *testing.T) {
	checkNoLeaks(t)
	closed := closedPort(t)
	res := &fakeResolver{table: map[string][]netip.Addr{}}
	h := startProxy(t, Config{
		Allow:    []*sandboxdv1.NetworkAllow{allow("*.test", 0)},
		Pinned:   loopback("refused.test"),
		Resolver: res,
	})
	_, br, hd := h.connectHTTP(fmt.Sprintf("refused.test:%d", closed))
	body, _ := io.ReadAll(br)
	if hd.code != 502 || !strings.Contains(string(body), "refused") {
		t.Fatalf("refused: %q %q", hd.status, body)
	}
	_, _, rep := h.socks5(socksAtypDomain, []byte("refused.test"), uint16(closed))
	if rep != socksConnRefused {
		t.Fatalf("SOCKS refused: %#x", rep)
	}
	_, br, hd = h.connectHTTP("nx.test:443")
	body, _ = io.ReadAll(br)
	if hd.code != 502 || !strings.Contains(string(body), "resolving nx.test") || !strings.Contains(string(body), "no such host") {
		t.Fatalf("nx: %q %q", hd.status, body)
	}
	_, _, rep = h.socks5(socksAtypDomain, []byte("nx.test"), 443)
	if rep != socksHostUnreachable {
		t.Fatalf("SOCKS nx: %#x", rep)
	}
	if ds := h.takeDenials(); len(ds) != 0 {
		t.Fatalf("upstream failures reported as denials: %v", ds)
	}

	// A dial that outlives DialTimeout gets 504.
	h2 := startProxy(t, Config{
		Allow:       []*sandboxdv1.NetworkAllow{allow("slow.test", 0)},
		Pinned:      loopback("slow.test"),
		DialTimeout: 100 * time.Millisecond,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	_, _, hd = h2.connectHTTP("slow.test:443")
	if hd.code != 504 {
		t.Fatalf("slow dial: %q", hd.status)
	}
}

func TestBadInputGetsTheRightAnswer(t *testing.T) {
	checkNoLeaks(t)
	rec := &dialRecorder{}
	h := startProxy(t, Config{
		Allow:  []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)},
		Pinned: loopback("allowed.test"),
		Dial:   rec.Dial,
	})
	status := func(raw string) (head, string) {
		t.Helper()
		c := h.dial()
		io.WriteString(c, raw)
		br := bufio.NewReader(c)
		hd := readHead(t, br)
		body, _ := io.ReadAll(br)
		return hd, string(body)
	}
	for _, tc := range []struct {
		name, raw string
		code      int
		body      string
	}{
		{"garbage", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 400, "malformed request"},
		{"not HTTP", "hello there\r\n\r\n", 400, "malformed request"},
		{"origin-form", "GET /path HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, originFormBody},
		{"https URL", "GET https://allowed.test/ HTTP/1.1\r\n\r\n", 400, "only http:// URLs"},
		{"CONNECT port 0", "CONNECT allowed.test:0 HTTP/1.1\r\n\r\n", 400, "allowed.test:0 has port 0 (sandboxd network.allow)\n"},
		{"CONNECT no port", "CONNECT allowed.test HTTP/1.1\r\n\r\n", 400, "is not host:port"},
		{"CONNECT big port", "CONNECT allowed.test:65536 HTTP/1.1\r\n\r\n", 400, "invalid port"},
		{"CONNECT numeric name", "CONNECT 127.1:80 HTTP/1.1\r\n\r\n", 400, "ending in a number"},
		{"CONNECT bad name", "CONNECT allowed.test!:80 HTTP/1.1\r\n\r\n", 400, "characters outside"},
		{"GET port 0", "GET http://allowed.test:0/ HTTP/1.1\r\n\r\n", 400, "has port 0"},
		{"oversized head", "GET http://allowed.test/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", MaxHeadBytes+10) + "\r\n\r\n", 431, "request head larger"},
	} {
		hd, body := status(tc.raw)
		if hd.code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %q %q, want %d with %q", tc.name, hd.status, body, tc.code, tc.body)
		}
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("bad requests were dialed: %v", d)
	}

	// SOCKS: only no-auth, only CONNECT, only known address types.
	c := h.dial()
	c.Write([]byte{5, 2, 1, 2})
	if b, _ := io.ReadAll(c); !bytes.Equal(b, []byte{5, 0xff}) {
		t.Errorf("SOCKS with auth methods only: % x, want 05 ff then close", b)
	}
	for _, tc := range []struct {
		name string
		req  []byte
		rep  byte
	}{
		{"BIND", []byte{5, 2, 0, 1, 127, 0, 0, 1, 0, 80}, socksCmdNotSupported},
		{"UDP ASSOCIATE", []byte{5, 3, 0, 1, 127, 0, 0, 1, 0, 80}, socksCmdNotSupported},
		{"address type 9", []byte{5, 1, 0, 9, 1, 2, 3, 4, 0, 80}, socksAtypNotSupported},
		{"port 0", append([]byte{5, 1, 0, 3, 12}, "allowed.test\x00\x00"...), socksNotAllowed},
		{"empty name", []byte{5, 1, 0, 3, 0, 0, 80}, socksNotAllowed},
		{"name with NUL", append([]byte{5, 1, 0, 3, 13}, "allowed.test\x00\x00\x50"...), socksNotAllowed},
	} {
		c := h.dial()
		c.Write([]byte{5, 1, 0})
		br := bufio.NewReader(c)
		br.Discard(2)
		c.Write(tc.req)
		if rep := readSOCKSReply(t, br); rep != tc.rep {
			t.Errorf("SOCKS %s: reply %#x, want %#x", tc.name, rep, tc.rep)
		}
		expectClosed(t, br)
	}
	for _, d := range h.takeDenials() {
		if d.Detail == "" || d.Target == "" || !isPrintable(d.Target) {
			t.Errorf("malformed-target denial %v", d)
		}
	}
	if d := rec.dialed(); len(d) != 0 {
		t.Fatalf("bad SOCKS requests were dialed: %v", d)
	}
}

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func TestSlowClientsAreCutOffAfterHandshakeTimeout(t *testing.T) {
	checkNoLeaks(t)
	o := startOrigin(t)
	h := startProxy(t, Config{
		Allow:            []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)},
		Pinned:           loopback("allowed.test"),
		HandshakeTimeout: 200 * time.Millisecond,
	})
	for _, prefix := range []string{"", "GET http://allowed.test/ HTTP/1.1\r\n", "\x05\x01"} {
		c := h.dial()
		io.WriteString(c, prefix)
		start := time.Now()
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
			t.Errorf("after %q: read %q, %v", prefix, b, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("after %q: closed after %v", prefix, d)
		}
	}
	// An idle kept-alive connection gets the same time for its next head.
	c := h.dial()
	fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\n\r\n", o.port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	readAllBody(t, resp)
	expectClosed(t, br)
}

func TestConnectionsBeyondMaxConnsAreClosed(t *testing.T) {
	checkNoLeaks(t)
	h := startProxy(t, Config{MaxConns: 2})
	clients := func() int {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return h.s.clients
	}
	waitClients := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); clients() != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("clients = %d, want %d", clients(), n)
			}
		}
	}
	a := h.dial()
	h.dial()
	waitClients(2)
	extra := h.dial()
	if b, err := io.ReadAll(extra); len(b) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection beyond the cap: read %q, %v", b, err)
	}
	a.Close()
	waitClients(1)
	c := h.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
	if hd := readHead(t, bufio.NewReader(c)); hd.code != 400 {
		t.Fatalf("after a slot freed: %q", hd.status)
	}
}

func TestCloseDuringTunnelsReturnsAndLeaksNothing(t *testing.T) {
	checkNoLeaks(t)
	fds := openFDs()
	t.Cleanup(func() {
		if fds < 0 {
			return
		}
		// The runtime keeps pipes for splice(2) in a sync.Pool and closes
		// them by finalizer; collecting twice empties the pool.
		for deadline := time.Now().Add(5 * time.Second); openFDs() > fds; time.Sleep(10 * time.Millisecond) {
			runtime.GC()
			if time.Now().After(deadline) {
				t.Errorf("open descriptors: %d now, %d before\n%s", openFDs(), fds, fdList())
				return
			}
		}
	})
	_, port := startEcho(t, "127.0.0.1:0")
	o := startOrigin(t)
	cfg := Config{Allow: []*sandboxdv1.NetworkAllow{allow("allowed.test", 0)}, Pinned: loopback("allowed.test")}
	h := startProxy(t, cfg)
	// A second listener on the same server, closed by Close too.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served2 := make(chan error, 1)
	go func() { served2 <- h.s.Serve(l2) }()

	var conns []net.Conn
	for range 3 {
		c, br, hd := h.connectHTTP(fmt.Sprintf("allowed.test:%d", port))
		if hd.code != 200 {
			t.Fatal(hd.status)
		}
		echoes(t, c, br, "before close")
		conns = append(conns, c)
	}
	c, br, rep := h.socks5(socksAtypDomain, []byte("allowed.test"), uint16(port))
	if rep != 0 {
		t.Fatal(rep)
	}
	echoes(t, c, br, "socks")
	conns = append(conns, c)
	kept := h.dial()
	fmt.Fprintf(kept, "GET http://allowed.test:%d/ HTTP/1.1\r\n\r\n", o.port)
	resp, err := http.ReadResponse(bufio.NewReader(kept), nil)
	if err != nil {
		t.Fatal(err)
	}
	readAllBody(t, resp)
	conns = append(conns, kept, h.dial()) // the last one mid-handshake

	closed := make(chan struct{})
	go func() {
		h.s.Close()
		h.s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with tunnels open")
	}
	if err := <-served2; err != nil {
		t.Fatalf("second Serve returned %v", err)
	}
	for i, c := range conns {
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("conn %d after Close: read %q, %v", i, b, err)
		}
		c.Close()
	}
	if _, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		t.Errorf("listener still accepts after Close")
	}
	// Serve on a closed server returns at once and closes its listener.
	l3, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := h.s.Serve(l3); err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, err := l3.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("listener given to Serve after Close is open: %v", err)
	}
}

func TestServeReturnsNilWhenItsListenerIsClosed(t *testing.T) {
	checkNoLeaks(t)
	s := New(Config{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	time.Sleep(10 * time.Millisecond)
	l.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
	}
	wg.Wait()
}

func TestParseHosts(t *testing.T) {
	in := `# operator pins
127.0.0.1   Allowed.Test  other.test.   # trailing comment
::1         allowed.test

10.0.0.5	registry.internal
	127.0.0.1 allowed.test
`
	got, err := ParseHosts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"allowed.test":      "127.0.0.1 ::1",
		"other.test":        "127.0.0.1",
		"registry.internal": "10.0.0.5",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for name, addrs := range want {
		var s []string
		for _, a := range got[name] {
			s = append(s, a.String())
		}
		if strings.Join(s, " ") != addrs {
			t.Errorf("%s: %v, want %s", name, s, addrs)
		}
	}
	for _, tc := range []struct{ in, err string }{
		{"127.0.0.1 a.test\n300.1.1.1 b.test\n", "hosts line 2: \"300.1.1.1\" is not an IP address"},
		{"\n\n127.0.0.1\n", "hosts line 3: address 127.0.0.1 has no names"},
		{"127.0.0.1 ok.test\n# c\n127.0.0.1 bad!name\n", "hosts line 3: \"bad!name\""},
		{"127.0.0.1 *.wild.test\n", "hosts line 1: \"*.wild.test\""},
		{"127.0.0.1 10.0.0.1\n", "hosts line 1: \"10.0.0.1\" has a host name ending in a number"},
		{"127.0.0.1 a.test\n127.0.0.1 " + strings.Repeat("a", 70<<10) + "\n", "hosts line 2:"},
	} {
		_, err := ParseHosts(strings.NewReader(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("ParseHosts(%.40q) = %v, want an error starting %q", tc.in, err, tc.err)
		}
	}
}

func TestInternalKind(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1":                  "loopback",
		"127.255.0.9":                "loopback",
		"::1":                        "loopback",
		"::ffff:127.0.0.1":           "loopback",
		"0.0.0.0":                    "unspecified",
		"0.1.2.3":                    "unspecified",
		"::":                         "unspecified",
		"169.254.169.254":            "link-local",
		"::ffff:169.254.1.1":         "link-local",
		"fe80::1":                    "link-local",
		"224.0.0.251":                "link-local multicast",
		"ff02::1":                    "link-local multicast",
		"ff01::1":                    "link-local multicast",
		"239.1.1.1":                  "multicast",
		"ff0e::1":                    "multicast",
		"fd00:ec2::254":              "cloud metadata",
		"100.100.100.200":            "cloud metadata",
		"::ffff:100.100.100.200":     "cloud metadata",
		"100.64.0.1":                 "",
		"64:ff9b::7f00:1":            "NAT64 loopback",
		"64:ff9b::a9fe:a9fe":         "NAT64 link-local",
		"64:ff9b::6464:64c8":         "NAT64 cloud metadata",
		"64:ff9b::5db8:d822":         "",
		"64:ff9b:1:7f00:0:100::":     "NAT64 loopback",
		"64:ff9b:1:0:a9:fea9:fe00:0": "NAT64 link-local",
		"64:ff9b:1::a00:1":           "",
		"64:ff9b:1::5db8:d822":       "",
		"10.0.0.1":                   "",
		"172.16.0.1":                 "",
		"192.168.1.1":                "",
		"fd00::1":                    "",
		"93.184.216.34":              "",
		"2606:2800::1":               "",
	} {
		if got := internalKind(netip.MustParseAddr(addr), netip.Prefix{}); got != want {
			t.Errorf("internalKind(%s) = %q, want %q", addr, got, want)
		}
	}
}

// nat64Embed places v4 in prefix as RFC 6052 (section 2.2) lays it out,
// skipping the u octet (bits 64 to 71).
func nat64Embed(prefix string, v4 string) netip.Addr {
	p := netip.MustParsePrefix(prefix)
	b := p.Addr().As16()
	at := p.Bits() / 8
	for _, c := range netip.MustParseAddr(v4).As4() {
		if at == 8 {
			at++
		}
		b[at] = c
		at++
	}
	return netip.AddrFrom16(b)
}

// embeddings are IPv4 addresses to embed in NAT64 prefixes, and what each
// is refused as.
var embeddings = map[string]string{
	"93.184.216.34":   "",
	"93.184.216.0":    "",
	"10.0.0.1":        "", // private, as outside NAT64
	"127.0.0.1":       "NAT64 loopback",
	"169.254.169.254": "NAT64 link-local",
	"100.100.100.200": "NAT64 cloud metadata",
}

func TestNAT64PrefixTheOperatorNamedIsReadAtItsLength(t *testing.T) {
	for _, prefix := range []string{"64:ff9b:1::/48", "64:ff9b:1::/56", "64:ff9b:1::/64", "64:ff9b:1::/96",
		"64:ff9b:1:a9fe::/96", "64:ff9b:1:7f00::/96", "64:ff9b:1:7f00::/64", "64:ff9b:1:a900::/56",
		"2001:db8::/32", "2001:db8:100::/40", "2001:db8:64::/96"} {
		nat64 := netip.MustParsePrefix(prefix)
		for v4, want := range embeddings {
			a := nat64Embed(prefix, v4)
			if got := internalKind(a, nat64); got != want {
				t.Errorf("%s (%s in %s, named): %q, want %q", a, v4, prefix, got, want)
			}
			if nat64.Bits() == 96 {
				continue
			}
			// Translators ignore the u octet and the suffix.
			b := a.As16()
			b[8], b[15] = 0xff, 0x01
			if got := internalKind(netip.AddrFrom16(b), nat64); got != want {
				t.Errorf("%s (%s in %s, named, u and suffix set): %q, want %q", netip.AddrFrom16(b), v4, prefix, got, want)
			}
		}
	}
	// Outside the named prefix, the well-known and the local-use prefixes
	// are read as without it.
	named := netip.MustParsePrefix("2001:db8:64::/96")
	for _, a := range []netip.Addr{nat64Embed("64:ff9b::/96", "127.0.0.1"), nat64Embed("64:ff9b:1::/64", "127.0.0.1")} {
		if got := internalKind(a, named); got != "NAT64 loopback" {
			t.Errorf("%s with %s named: %q, want NAT64 loopback", a, named, got)
		}
	}
}

func TestCheckNAT64Prefix(t *testing.T) {
	for prefix, ok := range map[string]bool{
		"64:ff9b:1::/48":      true,
		"64:ff9b:1:7f00::/96": true,
		"2001:db8::/32":       true,
		"2001:db8:64::/96":    true,
		"2001:db8::/33":       false, // not an RFC 6052 length
		"2001:db8::/128":      false,
		"2001:db8::1/96":      false, // bits beyond the length
		"::ffff:0:0/96":       false, // 4-in-6
		"64:ff9b::/96":        false, // the well-known prefix is /96 alone
		"64:ff9b::/32":        false, // takes in the well-known and the local-use prefixes
		"64:ff9b::/40":        false,
	} {
		if err := CheckNAT64Prefix(netip.MustParsePrefix(prefix)); (err == nil) != ok {
			t.Errorf("CheckNAT64Prefix(%s) = %v, want ok %v", prefix, err, ok)
		}
	}
	if CheckNAT64Prefix(netip.Prefix{}) == nil {
		t.Error("CheckNAT64Prefix of no prefix passed")
	}
	// A prefix it refuses is not used (New drops it): the local-use prefix
	// is read at every length still, and nothing panics reading at /128.
	for _, named := range []string{"64:ff9b::/40", "2001:db8::/128"} {
		a := netip.MustParseAddr("64:ff9b:1:0:7f:0:100:1")
		s := New(Config{NAT64Prefix: netip.MustParsePrefix(named)})
		if got := internalKind(a, s.cfg.NAT64Prefix); got != "NAT64 loopback" {
			t.Errorf("%s with %s named: %q, want NAT64 loopback", a, named, got)
		}
	}
}

func TestNAT64LocalUseAddressOutsideTheNamedPrefixIsReadAtEvery(t *testing.T) {
	named := netip.MustParsePrefix("64:ff9b:1::/96")
	for addr, want := range map[string]string{
		"64:ff9b:1::5db8:d822": "",                  // in the prefix: 93.184.216.34
		"64:ff9b:1::7f00:1":    "NAT64 loopback",    // in the prefix: 127.0.0.1
		"64:ff9b:1:7f00:1::":   "NAT64 loopback",    // outside it: 127.0.0.1 at /48
		"64:ff9b:1::5":         "NAT64 unspecified", // in it: 0.0.0.5
		"64:ff9b:1:0:0:500::":  "NAT64 unspecified", // outside it, every reading in 0/8
	} {
		if got := internalKind(netip.MustParseAddr(addr), named); got != want {
			t.Errorf("%s with %s named: %q, want %q", addr, named, got, want)
		}
	}
	// Unnamed, an address whose every reading is in 0/8 leads there.
	if got := internalKind(netip.MustParseAddr("64:ff9b:1::5"), netip.Prefix{}); got != "NAT64 unspecified" {
		t.Errorf("64:ff9b:1::5: %q, want NAT64 unspecified", got)
	}
}

func TestNAT64LocalUsePrefixOfAnUnnamedLengthIsReadAtEvery(t *testing.T) {
	for _, prefix := range []string{"64:ff9b:1::/48", "64:ff9b:1::/56", "64:ff9b:1::/64", "64:ff9b:1::/96",
		"64:ff9b:1:a9fe::/96", "64:ff9b:1:a900::/56"} {
		for v4, want := range embeddings {
			if want == "" {
				continue
			}
			// Refused, though maybe as what another length reads: in
			// 64:ff9b:1:a9fe::/96 every address reads as link-local at 48.
			a := nat64Embed(prefix, v4)
			if got := internalKind(a, netip.Prefix{}); got == "" {
				t.Errorf("%s (%s in %s): allowed, want refused (%s at its length)", a, v4, prefix, want)
			}
		}
	}
	// Translators ignore the u octet and the suffix, so an address with
	// them set still leads where the bits read at its length do.
	for addr, want := range map[string]string{
		"64:ff9b:1:0:7f:0:100:1":     "NAT64 loopback",       // /64, suffix set
		"64:ff9b:1:64:ff64:64c8::":   "NAT64 cloud metadata", // /56, u octet set
		"64:ff9b:1:a9fe:ffa9:fe00::": "NAT64 link-local",     // /48, u octet set
	} {
		if got := internalKind(netip.MustParseAddr(addr), netip.Prefix{}); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
	// The common /96 layout's public addresses read as 0/8 at the other
	// lengths, which no translator translates to.
	for _, v4 := range []string{"93.184.216.34", "93.184.216.0", "10.0.0.1"} {
		if a := nat64Embed("64:ff9b:1::/96", v4); internalKind(a, netip.Prefix{}) != "" {
			t.Errorf("%s (%s in 64:ff9b:1::/96): %q, want allowed", a, v4, internalKind(a, netip.Prefix{}))
		}
	}
	// The well-known prefix is /96 only, and 0/8 in it is refused.
	for v4, want := range map[string]string{"93.184.216.34": "", "127.0.0.1": "NAT64 loopback", "0.0.0.0": "NAT64 unspecified"} {
		if got := internalKind(nat64Embed("64:ff9b::/96", v4), netip.Prefix{}); got != want {
			t.Errorf("%s in 64:ff9b::/96: %q, want %q", v4, got, want)
		}
	}
}

func TestCloseCancelsDialsInFlight(t *testing.T) {
	checkNoLeaks(t)
	dialing := make(chan struct{}, 1)
	h := startProxy(t, Config{
		Allow:       []*sandboxdv1.NetworkAllow{allow("slow.test", 0)},
		Pinned:      loopback("slow.test"),
		DialTimeout: time.Minute,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			dialing <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	c := h.dial()
	io.WriteString(c, "CONNECT slow.test:443 HTTP/1.1\r\n\r\n")
	<-dialing
	start := time.Now()
	h.s.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with a dial in flight", d)
	}
}

func TestPanicServingOneConnectionIsLoggedAndContained(t *testing.T) {
	checkNoLeaks(t)
	var mu sync.Mutex
	var logs []string
	_, port := startEcho(t, "127.0.0.1:0")
	h := startProxy(t, Config{
		Allow:    []*sandboxdv1.NetworkAllow{allow("allowed.test", port)},
		Pinned:   loopback("allowed.test"),
		OnDenial: func(*sandboxdv1.Denial) { panic("denial sink exploded") },
		Logf: func(format string, args ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			mu.Unlock()
		},
	})
	bad := h.dial()
	io.WriteString(bad, "CONNECT other.test:1 HTTP/1.1\r\n\r\n")
	if b, _ := io.ReadAll(bad); len(b) != 0 {
		t.Fatalf("the connection whose handler panicked got %q", b)
	}
	c, br, hd := h.connectHTTP(fmt.Sprintf("allowed.test:%d", port))
	if hd.code != 200 {
		t.Fatalf("after a panic: %q", hd.status)
	}
	echoes(t, c, br, "still serving")
	// The connection closes while the panic unwinds, before it is logged.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(logs)
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "panic") || !strings.Contains(logs[0], "denial sink exploded") {
		t.Fatalf("logs %q", logs)
	}
}

// openFds is how many descriptors the test process has open.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

func TestForwardsAreCappedAndCutAtClose(t *testing.T) {
	checkNoLeaks(t)
	const maxConns, extra = 8, 40
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	var mu sync.Mutex
	accepted, ended := 0, make(chan struct{}, maxConns+extra)
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			go func() {
				// The host's service holds the connection until the
				// daemon's side goes away.
				io.Copy(io.Discard, c)
				c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{MaxConns: maxConns})
	served := make(chan error, 1)
	go func() { served <- s.ServeForward(fl, netip.MustParseAddrPort(up.Addr().String())) }()

	base := openFds(t)
	var clients []net.Conn
	for range maxConns + extra {
		c, err := net.Dial("tcp", fl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := accepted
		mu.Unlock()
		if n >= maxConns || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Past the cap a connection is closed as soon as it is accepted.
	closed := 0
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	mu.Lock()
	n := accepted
	mu.Unlock()
	if n != maxConns || closed != extra {
		t.Fatalf("%d connections reached the host's port and %d were closed at once, want %d and %d", n, closed, maxConns, extra)
	}
	// The clients' own descriptors, and per forwarded connection its
	// accepted and upstream sockets, a pipe for each direction of its
	// splice and the service's end.
	if grown, most := openFds(t)-base, len(clients)+maxConns*7; grown > most {
		t.Errorf("%d descriptors more with %d clients, at most %d expected", grown, len(clients), most)
	}

	// The clients still hold their ends: Close alone must cut the
	// connections to the host.
	s.Close()
	for range maxConns {
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatal("Close left a connection to the host's port open")
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("ServeForward: %v", err)
	}
	for _, c := range clients {
		c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); openFds(t) > base; {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open after Close, %d before the clients", openFds(t), base)
		}
		// Spliced pipes are pooled, and closed once collected.
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestABudgetBoundsConnectionsAcrossServers(t *testing.T) {
	checkNoLeaks(t)
	_, port := startEcho(t, "127.0.0.1:0")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	pol := []*sandboxdv1.NetworkAllow{allow("127.0.0.1", port)}
	b := NewBudget(3, "total-flag", 2, "key-flag")
	// Two sessions of one caller and one of another.
	a1 := startProxy(t, Config{Allow: pol, Budget: b, BudgetKey: "uid 1"})
	a2 := startProxy(t, Config{Allow: pol, Budget: b, BudgetKey: "uid 1"})
	other := startProxy(t, Config{Allow: pol, Budget: b, BudgetKey: "uid 2"})
	third := startProxy(t, Config{Allow: pol, Budget: b, BudgetKey: "uid 3"})

	c1, br1, hd := a1.connectHTTP(target)
	if hd.code != 200 {
		t.Fatalf("uid 1's first tunnel: %q", hd.status)
	}
	echoes(t, c1, br1, "one")
	if _, _, rep := a2.socks5(socksAtypIPv4, []byte{127, 0, 0, 1}, uint16(port)); rep != socksSucceeded {
		t.Fatalf("uid 1's second tunnel: SOCKS reply %#x", rep)
	}

	perKey := target + " would exceed the 2 connections to the outside uid 1's sessions may hold open together"
	_, br, hd := a2.connectHTTP(target)
	body, _ := io.ReadAll(br)
	// A refusal for the budget passes as connections close: clients
	// retry 503 and SOCKS reply 1, where 403 and reply 2 are final.
	if hd.code != 503 || hd.header.Get("Retry-After") == "" || hd.header.Get(DeniedHeader) != perKey || !strings.Contains(string(body), "(sandboxd quota.key-flag)") {
		t.Errorf("uid 1 over its budget: %q %v %q", hd.status, hd.header, body)
	}
	if _, _, rep := a1.socks5(socksAtypIPv4, []byte{127, 0, 0, 1}, uint16(port)); rep != socksFailure {
		t.Errorf("uid 1 over its budget: SOCKS reply %#x", rep)
	}
	ds := append(a1.takeDenials(), a2.takeDenials()...)
	if len(ds) != 2 || ds[0].Field != "quota.key-flag" || ds[0].Target != target || ds[1].Field != "quota.key-flag" {
		t.Errorf("denials %v", ds)
	}

	// Another caller still gets one, and then the daemon's whole budget is
	// used up.
	c3, br3, hd := other.connectHTTP(target)
	if hd.code != 200 {
		t.Fatalf("uid 2, within the budget: %q", hd.status)
	}
	echoes(t, c3, br3, "three")
	_, _, hd = third.connectHTTP(target)
	if want := target + " would exceed the 3 connections to the outside the daemon holds open for all sessions"; hd.code != 503 || hd.header.Get(DeniedHeader) != want {
		t.Errorf("uid 3 over the daemon's budget: %q %v", hd.status, hd.header)
	}
	if ds := third.takeDenials(); len(ds) != 1 || ds[0].Field != "quota.total-flag" {
		t.Errorf("denials %v", ds)
	}

	// A tunnel that ends gives its connection back.
	c1.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, br, hd := third.connectHTTP(target)
		if hd.code == 200 {
			echoes(t, c, br, "again")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the budget was not given back: %q %v", hd.status, hd.header)
		}
		time.Sleep(20 * time.Millisecond)
	}
	third.takeDenials()

	// A forward beyond the budget is closed, and is a denial.
	s := New(Config{Budget: b, BudgetKey: "uid 1", OnDenial: func(d *sandboxdv1.Denial) {
		third.mu.Lock()
		third.denials = append(third.denials, d)
		third.mu.Unlock()
	}})
	defer s.Close()
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeForward(fl, netip.MustParseAddrPort(target))
	fc, err := net.Dial("tcp", fl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fc.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := fc.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a forward over the budget: read %d, %v; want EOF", n, err)
	}
	if ds := third.takeDenials(); len(ds) != 1 || ds[0].Field != "quota.total-flag" || ds[0].Operation != "forward" || ds[0].Target != target {
		t.Errorf("forward denials %v", ds)
	}
}
