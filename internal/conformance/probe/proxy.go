package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// bodyPrefix is how much of a response body the network operations report:
// enough for the suite's token and a denial's reason.
const bodyPrefix = 256

// deniedHeader is the header the daemon's proxy names a denial's reason in.
const deniedHeader = "X-Sandboxd-Denied"

// httpGet fetches URL the way a well-behaved tool does: through the proxy
// the environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), as Go's
// http.ProxyFromEnvironment reads them. It is ok when the answer is 200.
// Detail: the status, the denial header and the start of the body.
func httpGet(args []string) Result {
	client := &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true},
		Timeout:   ioTimeout,
	}
	resp, err := client.Get(args[0])
	if err != nil {
		return outcome(err, err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, bodyPrefix))
	return Result{OK: resp.StatusCode == http.StatusOK, Detail: map[string]any{
		"status": resp.StatusCode,
		"denied": resp.Header.Get(deniedHeader),
		"body":   string(body),
	}}
}

// proxyAddr is the host:port of the proxy the environment names in the
// first of vars that is set.
func proxyAddr(vars ...string) (string, error) {
	for _, v := range vars {
		raw := os.Getenv(v)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%s=%q: not a proxy URL", v, raw)
		}
		if u.Port() == "" {
			return "", fmt.Errorf("%s=%q: no port", v, raw)
		}
		return u.Host, nil
	}
	return "", fmt.Errorf("none of %v is set", vars)
}

// proxyConnect opens a tunnel to HOST:PORT with an HTTP CONNECT to the
// proxy $HTTPS_PROXY names, by hand (no library decides whether to use the
// proxy), then sends GET / through it. It is ok when the proxy answered 200
// and the origin answered the GET. Detail: the proxy's status, its denial
// header and body, and the origin's status and body.
func proxyConnect(args []string) Result {
	target := args[0]
	proxy, err := proxyAddr("HTTPS_PROXY", "https_proxy")
	if err != nil {
		return Result{Errno: "ENOENT", Detail: err.Error()}
	}
	c, err := net.DialTimeout("tcp", proxy, ioTimeout)
	if err != nil {
		return outcome(err, "dial proxy "+proxy+": "+err.Error())
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return outcome(err, nil)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return outcome(err, "proxy answer: "+err.Error())
	}
	detail := map[string]any{"status": resp.StatusCode, "denied": resp.Header.Get(deniedHeader)}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, bodyPrefix))
		resp.Body.Close()
		detail["body"] = string(body)
		return Result{Detail: detail}
	}
	return originGet(c, br, target, detail)
}

// originGet sends GET / on an open tunnel to target and reads the answer
// into detail: ok when the origin answered at all.
func originGet(c net.Conn, br *bufio.Reader, target string, detail map[string]any) Result {
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target); err != nil {
		r := outcome(err, nil)
		detail["error"] = err.Error()
		r.Detail = detail
		return r
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		r := outcome(err, nil)
		detail["error"] = "origin: " + err.Error()
		r.Detail = detail
		return r
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, bodyPrefix))
	detail["origin_status"] = resp.StatusCode
	detail["body"] = string(body)
	return Result{OK: true, Detail: detail}
}

// SOCKS5 (RFC 1928) constants the probe uses.
const (
	socksVersion     = 5
	socksNoAuth      = 0
	socksCmdConnect  = 1
	socksAtypIPv4    = 1
	socksAtypDomain  = 3
	socksAtypIPv6    = 4
	socksReplyDenied = 2
)

// socksRequest is the CONNECT request for host:port: an IPv4 or IPv6
// literal goes as an address, anything else as a domain name for the
// proxy to resolve (socks5h).
func socksRequest(target string) ([]byte, error) {
	host, portStr, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	req := []byte{socksVersion, socksCmdConnect, 0}
	switch ip := net.ParseIP(host); {
	case ip != nil && ip.To4() != nil:
		req = append(append(req, socksAtypIPv4), ip.To4()...)
	case ip != nil:
		req = append(append(req, socksAtypIPv6), ip.To16()...)
	default:
		if len(host) == 0 || len(host) > 255 {
			return nil, fmt.Errorf("host %q: a SOCKS5 domain name is 1 to 255 bytes", host)
		}
		req = append(append(req, socksAtypDomain, byte(len(host))), host...)
	}
	return binary.BigEndian.AppendUint16(req, uint16(port)), nil
}

// readSocksReply reads a SOCKS5 reply and returns its code.
func readSocksReply(r io.Reader) (byte, error) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, err
	}
	if head[0] != socksVersion {
		return 0, fmt.Errorf("reply version %d, want 5", head[0])
	}
	var n int
	switch head[3] {
	case socksAtypIPv4:
		n = 4
	case socksAtypIPv6:
		n = 16
	case socksAtypDomain:
		l := make([]byte, 1)
		if _, err := io.ReadFull(r, l); err != nil {
			return head[1], err
		}
		n = int(l[0])
	default:
		return head[1], fmt.Errorf("reply address type %d", head[3])
	}
	// The bound address and port: read and ignored.
	if _, err := io.ReadFull(r, make([]byte, n+2)); err != nil {
		return head[1], err
	}
	return head[1], nil
}

// socksConnect opens a SOCKS5 CONNECT (no authentication) to HOST:PORT
// through the proxy $ALL_PROXY names, by hand, then sends GET / through it.
// It is ok when the reply is 0 (succeeded) and the origin answered the GET.
// Detail: the reply code, and the origin's status and body.
func socksConnect(args []string) Result {
	target := args[0]
	req, err := socksRequest(target)
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	proxy, err := proxyAddr("ALL_PROXY", "all_proxy")
	if err != nil {
		return Result{Errno: "ENOENT", Detail: err.Error()}
	}
	c, err := net.DialTimeout("tcp", proxy, ioTimeout)
	if err != nil {
		return outcome(err, "dial proxy "+proxy+": "+err.Error())
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	br := bufio.NewReader(c)
	if _, err := c.Write([]byte{socksVersion, 1, socksNoAuth}); err != nil {
		return outcome(err, nil)
	}
	method := make([]byte, 2)
	if _, err := io.ReadFull(br, method); err != nil {
		return outcome(err, "method selection: "+err.Error())
	}
	if method[0] != socksVersion || method[1] != socksNoAuth {
		return Result{Detail: map[string]any{"error": fmt.Sprintf("method selection answered %v, want [5 0]", method)}}
	}
	if _, err := c.Write(req); err != nil {
		return outcome(err, nil)
	}
	code, err := readSocksReply(br)
	detail := map[string]any{"reply": int(code)}
	if err != nil {
		r := outcome(err, nil)
		detail["error"] = "reply: " + err.Error()
		r.Detail = detail
		return r
	}
	if code != 0 {
		return Result{Detail: detail}
	}
	return originGet(c, br, target, detail)
}

// dnsLookup resolves NAME with Go's own resolver, which asks the name
// servers of /etc/resolv.conf directly (after /etc/hosts). It is ok when
// the name resolved; when it did not, Detail says whether a name server
// answered at all ("not_found": it said there is no such name), which is
// what tells a reachable resolver from an unreachable one.
func dnsLookup(args []string) Result {
	r := &net.Resolver{PreferGo: true}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, args[0])
	if err != nil {
		res := outcome(err, nil)
		detail := map[string]any{"error": err.Error()}
		var de *net.DNSError
		if errors.As(err, &de) {
			detail["not_found"] = de.IsNotFound
			detail["timeout"] = de.IsTimeout
		}
		res.Detail = detail
		return res
	}
	return outcome(nil, addrs)
}
