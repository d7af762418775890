package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestSocksRequest(t *testing.T) {
	for _, c := range []struct {
		target string
		want   []byte
	}{
		{"allowed.test:8080", append([]byte{5, 1, 0, 3, 12}, append([]byte("allowed.test"), 0x1f, 0x90)...)},
		{"127.0.0.1:80", []byte{5, 1, 0, 1, 127, 0, 0, 1, 0, 80}},
		{"[::1]:443", []byte{5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0xbb}},
	} {
		got, err := socksRequest(c.target)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("socksRequest(%q) = %v, %v; want %v", c.target, got, err, c.want)
		}
	}
	for _, bad := range []string{"no-port", "host:99999", ":80", strings.Repeat("a", 256) + ":1"} {
		if got, err := socksRequest(bad); err == nil {
			t.Errorf("socksRequest(%q) = %v, want an error", bad, got)
		}
	}
}

// origin answers every request on a tunnel with 200 and body.
func origin(c net.Conn, br *bufio.Reader, body string) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	io.Copy(io.Discard, req.Body)
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// fakeProxy serves one protocol on a loopback port: it admits allowed
// (host:port) and denies the rest as the daemon's proxy does, and records
// what it was asked for; a tunnel's far end is the proxy itself, answering
// "origin of TARGET".
func fakeProxy(t *testing.T, allowed string, serve func(c net.Conn, br *bufio.Reader, allowed string)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c), allowed)
			}()
		}
	}()
	return l.Addr().String()
}

func serveHTTPProxy(c net.Conn, br *bufio.Reader, allowed string) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Host != allowed {
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\n%s: %s not in network.allow\r\nContent-Length: 6\r\n\r\ndenied", deniedHeader, req.Host)
		return
	}
	if req.Method == http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		origin(c, br, "origin of "+req.Host)
		return
	}
	body := "origin of " + req.Host + " " + req.URL.String()
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

func serveSocks(c net.Conn, br *bufio.Reader, allowed string) {
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil {
		return
	}
	if _, err := io.ReadFull(br, make([]byte, head[1])); err != nil {
		return
	}
	c.Write([]byte{5, 0})
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil {
		return
	}
	var host string
	switch req[3] {
	case socksAtypIPv4, socksAtypIPv6:
		ip := make(net.IP, map[byte]int{socksAtypIPv4: 4, socksAtypIPv6: 16}[req[3]])
		io.ReadFull(br, ip)
		host = ip.String()
	case socksAtypDomain:
		n := make([]byte, 1)
		io.ReadFull(br, n)
		name := make([]byte, n[0])
		io.ReadFull(br, name)
		host = string(name)
	}
	port := make([]byte, 2)
	io.ReadFull(br, port)
	target := net.JoinHostPort(host, fmt.Sprint(binary.BigEndian.Uint16(port)))
	if target != allowed {
		c.Write([]byte{5, socksReplyDenied, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0x1f, 0x90})
	origin(c, br, "origin of "+target)
}

func detailMap(t *testing.T, r Result) map[string]any {
	t.Helper()
	d, ok := r.Detail.(map[string]any)
	if !ok {
		t.Fatalf("detail %v (%T), want a map", r.Detail, r.Detail)
	}
	return d
}

func TestProxyConnect(t *testing.T) {
	proxy := fakeProxy(t, "allowed.test:8080", serveHTTPProxy)
	t.Setenv("HTTPS_PROXY", "http://"+proxy)
	ok := proxyConnect([]string{"allowed.test:8080"})
	if d := detailMap(t, ok); !ok.OK || d["status"] != 200 || d["origin_status"] != 200 || d["body"] != "origin of allowed.test:8080" {
		t.Errorf("allowed: %+v", ok)
	}
	no := proxyConnect([]string{"other.test:8080"})
	if d := detailMap(t, no); no.OK || d["status"] != 403 || !strings.Contains(d["denied"].(string), "other.test:8080") {
		t.Errorf("denied: %+v", no)
	}
	t.Setenv("HTTPS_PROXY", "")
	if r := proxyConnect([]string{"allowed.test:8080"}); r.OK || r.Errno != "ENOENT" {
		t.Errorf("without HTTPS_PROXY: %+v", r)
	}
}

func TestSocksConnect(t *testing.T) {
	for _, target := range []string{"allowed.test:8080", "127.0.0.1:8080", "[::1]:8080"} {
		proxy := fakeProxy(t, target, serveSocks)
		t.Setenv("ALL_PROXY", "socks5h://"+proxy)
		ok := socksConnect([]string{target})
		if d := detailMap(t, ok); !ok.OK || d["reply"] != 0 || d["origin_status"] != 200 || d["body"] != "origin of "+target {
			t.Errorf("%s allowed: %+v", target, ok)
		}
		no := socksConnect([]string{"other.test:8080"})
		if d := detailMap(t, no); no.OK || d["reply"] != socksReplyDenied {
			t.Errorf("%s: other.test denied: %+v", target, no)
		}
	}
}

func TestHTTPGetUsesTheEnvironmentsProxy(t *testing.T) {
	// http.ProxyFromEnvironment reads the environment once per process:
	// this is the only test that uses it.
	proxy := fakeProxy(t, "allowed.test:8080", serveHTTPProxy)
	t.Setenv("HTTP_PROXY", "http://"+proxy)
	ok := httpGet([]string{"http://allowed.test:8080/path"})
	if d := detailMap(t, ok); !ok.OK || d["status"] != 200 || d["body"] != "origin of allowed.test:8080 http://allowed.test:8080/path" {
		t.Errorf("allowed: %+v", ok)
	}
	no := httpGet([]string{"http://other.test:8080/"})
	if d := detailMap(t, no); no.OK || d["status"] != 403 || !strings.Contains(d["denied"].(string), "other.test:8080") || d["body"] != "denied" {
		t.Errorf("denied: %+v", no)
	}
}
