package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// The fuzz policy and what it may lead to. Every address the proxy could
// reach is distinct, so a dial says which decision produced it.
var (
	fuzzAllow = []*sandboxdv1.NetworkAllow{
		allow("allowed.test", 80),
		allow("*.wild.test", 0),
		allow("10.1.2.3", 443),
		allow("2001:db8::1", 443),
	}
	fuzzPinned = map[string][]netip.Addr{
		"allowed.test": {netip.MustParseAddr("192.0.2.1")},
		"a.wild.test":  {netip.MustParseAddr("192.0.2.2")},
		"other.test":   {netip.MustParseAddr("192.0.2.66")}, // pinned but not allowed
	}
	// The resolver answers every other *.wild.test name with
	// fuzzResolved, except these, which must be refused.
	fuzzResolved = netip.MustParseAddr("192.0.2.9")
	fuzzRebound  = map[string][]netip.Addr{
		"rebind.wild.test": {netip.MustParseAddr("127.0.0.1")},
		"meta.wild.test":   {netip.MustParseAddr("169.254.169.254")},
		"mixed.wild.test":  {netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("::ffff:127.0.0.1")},
	}
)

// fuzzDialOK reports whether the fuzz policy can ever lead to dialing ap.
func fuzzDialOK(ap netip.AddrPort) bool {
	switch ap.Addr().String() {
	case "192.0.2.1":
		return ap.Port() == 80
	case "192.0.2.2", "192.0.2.9":
		return true
	case "10.1.2.3", "2001:db8::1":
		return ap.Port() == 443
	}
	return false
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

var fuzzSeeds = []string{
	"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\nhello",
	"CONNECT allowed.test:81 HTTP/1.1\r\n\r\n",
	"CONNECT other.test:80 HTTP/1.1\r\n\r\n",
	"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n",
	"CONNECT [2001:db8:0::1]:443 HTTP/1.1\r\n\r\n",
	"CONNECT 10.1.2.3:443 HTTP/1.1\r\n\r\n",
	"CONNECT [::ffff:10.1.2.3]:443 HTTP/1.1\r\n\r\n",
	"CONNECT 10.1.2.3.:443 HTTP/1.1\r\n\r\n",
	"CONNECT b.WILD.test.:9 HTTP/1.1\r\n\r\n",
	"CONNECT rebind.wild.test:80 HTTP/1.1\r\n\r\n",
	"CONNECT mixed.wild.test:80 HTTP/1.1\r\n\r\n",
	"CONNECT wild.test:80 HTTP/1.1\r\n\r\n",
	"CONNECT allowed.test:0 HTTP/1.1\r\n\r\n",
	"CONNECT allowed.test HTTP/1.1\r\n\r\n",
	"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://other.test/ HTTP/1.1\r\n\r\n",
	"GET http://allowed.test/a HTTP/1.1\r\n\r\nGET http://a.wild.test:8080/b HTTP/1.1\r\nConnection: close\r\n\r\n",
	"POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET http://x.wild.test/ HTTP/1.1\r\n\r\n",
	"POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
	"GET http://allowed.test:80@other.test/ HTTP/1.1\r\n\r\n",
	"GET http://[2001:db8::1]:443/ HTTP/1.0\r\n\r\n",
	"GET https://allowed.test/ HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
	"\x16\x03\x01\x00\x05hello",
	"\x05\x01\x00\x05\x01\x00\x03\x0callowed.test\x00\x50ping",
	"\x05\x01\x00\x05\x01\x00\x03\x0callowed.test\x00\x51",
	"\x05\x02\x02\x00\x05\x01\x00\x01\x0a\x01\x02\x03\x01\xbb",
	"\x05\x01\x00\x05\x01\x00\x04\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01\xbb",
	"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x0a\x01\x02\x03\x01\xbb",
	"\x05\x01\x00\x05\x01\x00\x03\x10rebind.wild.test\x00\x50",
	"\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50",
	"\x05\x01\x02",
	"\x05\x00",
	"\x05",
}

func FuzzHandshake(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	setHostAddrs(f, loopbackOnly)
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a failure too; crashing the worker makes the fuzzer
		// keep the input that caused it.
		watchdog := time.AfterFunc(10*time.Second, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("input %q still being served after 10s\n%s", data, buf[:runtime.Stack(buf, true)]))
		})
		defer watchdog.Stop()
		var wg sync.WaitGroup
		defer wg.Wait()
		s := New(Config{
			Allow:            fuzzAllow,
			Pinned:           fuzzPinned,
			HandshakeTimeout: 2 * time.Second,
			DialTimeout:      2 * time.Second,
			Resolver: resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
				rooted := strings.HasSuffix(host, ".")
				host = strings.TrimSuffix(host, ".")
				if rooted != strings.Contains(host, ".") || !policy.MatchHost("*.wild.test", host) || host != strings.ToLower(host) || strings.HasSuffix(host, ".") || fuzzPinned[host] != nil {
					t.Errorf("resolved %q (rooted: %v), which the policy does not admit or is pinned or not canonical", host, rooted)
				}
				if a, ok := fuzzRebound[host]; ok {
					return slices.Clone(a), nil
				}
				if strings.HasPrefix(host, "nx.") {
					return nil, errors.New("fuzz: no such host")
				}
				return []netip.Addr{fuzzResolved}, nil
			}),
			Dial: func(_ context.Context, network, addr string) (net.Conn, error) {
				ap, err := netip.ParseAddrPort(addr)
				if err != nil || network != "tcp" {
					t.Errorf("dialed %s %q: not an address", network, addr)
					return nil, errors.New("fuzz: bad dial")
				}
				if !fuzzDialOK(ap) {
					t.Errorf("dialed %s, which the policy never allows (input %q)", addr, data)
				}
				return fakeOrigin(&wg), nil
			},
			OnDenial: func(d *sandboxdv1.Denial) {
				if _, err := proto.Marshal(d); err != nil {
					t.Errorf("denial does not marshal: %v", err)
				}
				if d.Field != "network.allow" || d.Errno != "EACCES" || d.Target == "" || d.Detail == "" ||
					(d.Operation != "connect" && d.Operation != "http") || d.Time == nil {
					t.Errorf("denial %v", d)
				}
			},
		})
		defer s.Close()

		client, server := net.Pipe()
		wg.Add(2)
		go func() {
			defer wg.Done()
			io.Copy(io.Discard, client)
		}()
		go func() {
			defer wg.Done()
			client.Write(data)
			client.Close()
		}()
		s.handle(server)
	})
}

// fakeOrigin is one end of a pipe whose other end reads an HTTP request
// (or whatever comes), answers with a short response and hangs up.
func fakeOrigin(wg *sync.WaitGroup) net.Conn {
	proxySide, originSide := net.Pipe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer originSide.Close()
		originSide.SetDeadline(time.Now().Add(5 * time.Second))
		if req, err := http.ReadRequest(bufio.NewReader(originSide)); err == nil {
			io.Copy(io.Discard, req.Body)
		}
		fmt.Fprint(originSide, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}()
	return proxySide
}
