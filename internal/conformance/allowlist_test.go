//go:build linux || darwin

package conformance

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// The proxy a sandbox under network ALLOWLIST reaches the network through,
// as its environment names it.
const (
	proxyHTTP  = "http://127.0.0.1:3128"
	proxySOCKS = "socks5h://127.0.0.1:3128"
	proxyNone  = "localhost,127.0.0.1,::1"
)

// proxyOps are the three ways a sandboxed program goes through the proxy:
// plain HTTP forwarding (absolute-form GET, as Go's ProxyFromEnvironment
// does it), an HTTP CONNECT tunnel and a SOCKS5 CONNECT.
var proxyOps = []string{"http-get", "proxy-connect", "socks-connect"}

// via is the probe step that reaches target (host:port) by op.
func via(op, target string) []string {
	if op == "http-get" {
		return []string{op, "http://" + target + "/"}
	}
	return []string{op, target}
}

// proxyOperation is the Denial.operation the proxy records for op.
func proxyOperation(op string) string {
	if op == "http-get" {
		return "http"
	}
	return "connect"
}

// hostResolverAnswers says whether the host's own name servers, asked the
// way the probe's dns-lookup asks them, answer for name at all (with
// addresses or with "no such host").
func hostResolverAnswers(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := (&net.Resolver{PreferGo: true}).LookupHost(ctx, name)
	var de *net.DNSError
	return err == nil || errors.As(err, &de) && de.IsNotFound
}

// allowlistCase: Landlock has no network namespace to leave only the
// proxy reachable, and macOS has no proxy yet: both refuse.
func allowlistCase(name string, setup func(f *fixture) spec) conformanceCase {
	return conformanceCase{name: name, landlockRefuses: "network.mode", darwinRefuses: "network.allow", setup: setup}
}

// proxySpec turns proxy steps into a spec under policy whose after checks
// each step's answer (the origin's token, or the proxy's own refusal:
// 403 naming the target in X-Sandboxd-Denied, SOCKS reply 2) and that
// each denial was recorded, then runs more.
func proxySpec(policy *sandboxdv1.Policy, ps []proxyStep, more func(t *testing.T, s *session)) spec {
	var steps []step
	for _, p := range ps {
		if p.allowed {
			steps = append(steps, allow(via(p.op, p.target)...))
		} else {
			steps = append(steps, deny(via(p.op, p.target)...))
		}
	}
	return spec{policy: policy, steps: steps, after: func(t *testing.T, s *session) {
		var wants []denialWant
		for i, p := range ps {
			o := s.outcomes[i]
			if p.allowed {
				reachedOrigin(t, p, o)
				continue
			}
			deniedByProxy(t, p, o)
			wants = append(wants, denialWant{field: "network.allow", operation: proxyOperation(p.op), target: p.target,
				errno: "EACCES", detail: p.detail, needDetail: true})
		}
		if len(wants) > 0 {
			recordedDenials(t, s.res.SessionID, wants...)
			auditedDenial(t, s.res.SessionID, wants[0])
		}
		if more != nil {
			more(t, s)
		}
	}}
}

// checkProxyEnvironment: the variables that point tools at the proxy, and
// keep them from sending the sandbox's own loopback to it.
func checkProxyEnvironment(t *testing.T, env outcome) {
	t.Helper()
	for k, want := range map[string]string{
		"HTTP_PROXY": proxyHTTP, "HTTPS_PROXY": proxyHTTP, "http_proxy": proxyHTTP, "https_proxy": proxyHTTP,
		"ALL_PROXY": proxySOCKS, "all_proxy": proxySOCKS,
		"NO_PROXY": proxyNone, "no_proxy": proxyNone,
	} {
		if got := envOf(env, k); got != want {
			t.Errorf("%s=%q in the sandbox, want %q", k, got, want)
		}
	}
}

func allowlistCases() []conformanceCase {
	return []conformanceCase{
		allowlistCase("can reach allowed host through the proxy by HTTP, CONNECT and SOCKS", func(f *fixture) spec {
			o := newOrigin(f.t)
			var ps []proxyStep
			for _, op := range proxyOps {
				ps = append(ps, proxyStep{op: op, target: o.at(allowedName), allowed: true, token: o.token})
			}
			sp := proxySpec(allowPolicy(allowEntry(allowedName, o.port)), ps, nil)
			sp.steps = append(sp.steps, allow("env"))
			after := sp.after
			sp.after = func(t *testing.T, s *session) {
				after(t, s)
				checkProxyEnvironment(t, s.outcomes[len(ps)])
			}
			return sp
		}),
		allowlistCase("cannot reach host or port not in network.allow through the proxy", func(f *fixture) spec {
			o, q := newOrigin(f.t), newOrigin(f.t)
			// The same server the policy allows, under a name and an
			// address the policy does not name; the allowed name on a
			// port the policy does not name.
			ps := []proxyStep{{op: "http-get", target: o.at(allowedName), allowed: true, token: o.token}}
			for _, target := range []string{o.at(otherName), q.at(allowedName)} {
				for _, op := range proxyOps {
					ps = append(ps, proxyStep{op: op, target: target})
				}
			}
			ps = append(ps,
				proxyStep{op: "proxy-connect", target: o.at("127.0.0.1")},
				proxyStep{op: "socks-connect", target: o.at("127.0.0.1")})
			return proxySpec(allowPolicy(allowEntry(allowedName, o.port)), ps, func(t *testing.T, s *session) {
				if strings.Count(s.stdout, o.token) > 1 || strings.Contains(s.stdout, q.token) {
					t.Errorf("an origin answered a denied request:\n%s", s)
				}
			})
		}),
		allowlistCase("an allowed port of the host's loopback is reached as default clients reach it", func(f *fixture) spec {
			// NO_PROXY keeps 127.0.0.1 away from the proxy: the sandbox's
			// own 127.0.0.1 at the allowed port leads to the host's. A
			// port the policy does not name stays the sandbox's own.
			o, q := newOrigin(f.t), newOrigin(f.t)
			return spec{
				policy: allowPolicy(allowEntry("127.0.0.1", o.port)),
				steps: []step{
					allow("http-get", "http://127.0.0.1:"+strconv.Itoa(o.port)+"/"),
					deny("http-get", "http://127.0.0.1:"+strconv.Itoa(q.port)+"/"),
				},
				after: func(t *testing.T, s *session) {
					if !strings.Contains(s.outcomes[0].String(), o.token) {
						t.Errorf("the allowed host port answered %s, want its token %s", s.outcomes[0], o.token)
					}
					if strings.Contains(s.stdout, q.token) {
						t.Errorf("a host port the policy does not name answered:\n%s", s)
					}
				},
			}
		}),
		allowlistCase("an allowed localhost port of the host is reached as default clients reach it", func(f *fixture) spec {
			// A local model server as agents are configured for it
			// (http://localhost:11434): NO_PROXY keeps localhost away from
			// the proxy, and the sandbox's own loopback at the allowed
			// port leads to the host's 127.0.0.1. A port the policy does
			// not name stays the sandbox's own.
			o, q := newOrigin(f.t), newOrigin(f.t)
			return spec{
				policy: allowPolicy(allowEntry("localhost", o.port)),
				steps: []step{
					allow("http-get", "http://localhost:"+strconv.Itoa(o.port)+"/"),
					deny("http-get", "http://localhost:"+strconv.Itoa(q.port)+"/"),
				},
				after: func(t *testing.T, s *session) {
					if !strings.Contains(s.outcomes[0].String(), o.token) {
						t.Errorf("the allowed host port answered %s, want its token %s", s.outcomes[0], o.token)
					}
					if strings.Contains(s.stdout, q.token) {
						t.Errorf("a host port the policy does not name answered:\n%s", s)
					}
				},
			}
		}),
		allowlistCase("wildcard host admits names below it, never its apex", func(f *fixture) spec {
			o := newOrigin(f.t)
			ps := []proxyStep{
				{op: "http-get", target: o.at(wildSub), allowed: true, token: o.token},
				{op: "proxy-connect", target: o.at(wildSub), allowed: true, token: o.token},
				{op: "socks-connect", target: o.at(wildSub), allowed: true, token: o.token},
			}
			for _, op := range proxyOps {
				ps = append(ps, proxyStep{op: op, target: o.at(wildApex)})
			}
			return proxySpec(allowPolicy(allowEntry("*."+wildApex, o.port)), ps, nil)
		}),
		allowlistCase("cannot reach loopback through an allowed name that resolves there", func(f *fixture) spec {
			// localhost is not pinned: the proxy resolves it as the host
			// does, to the loopback, which the policy does not name. The
			// same server is reachable under a pinned name. (http-get is
			// not tried: NO_PROXY keeps localhost away from the proxy.)
			o := newDualOrigin(f.t, false)
			ps := []proxyStep{
				{op: "proxy-connect", target: o.at(allowedName), allowed: true, token: o.token},
				{op: "proxy-connect", target: o.at("localhost"), detail: "loopback"},
				{op: "socks-connect", target: o.at("localhost"), detail: "loopback"},
			}
			return proxySpec(allowPolicy(allowEntry("localhost", o.port), allowEntry(allowedName, o.port)), ps, nil)
		}),
		allowlistCase("can reach allowed IPv6 literal, not 127.0.0.1 on its port", func(f *fixture) spec {
			o := newDualOrigin(f.t, true)
			q := newDualOrigin(f.t, true)
			ps := []proxyStep{
				{op: "proxy-connect", target: o.at("::1"), allowed: true, token: o.token6},
				{op: "socks-connect", target: o.at("::1"), allowed: true, token: o.token6},
				{op: "proxy-connect", target: o.at("127.0.0.1")},
				{op: "socks-connect", target: o.at("127.0.0.1")},
				{op: "proxy-connect", target: q.at("::1")},
				{op: "socks-connect", target: q.at("::1")},
			}
			return proxySpec(allowPolicy(allowEntry("::1", o.port)), ps, func(t *testing.T, s *session) {
				if strings.Contains(s.stdout, o.token) || strings.Contains(s.stdout, q.token6) {
					t.Errorf("an origin the policy does not name answered:\n%s", s)
				}
			})
		}),
		allowlistCase("cannot leave the sandbox around the proxy", noWayAround),
	}
}

// noWayAround: a program that ignores the proxy variables reaches
// nothing, not even the allowed destination: the host's loopback is not
// the sandbox's, the host's other addresses are unreachable, and so are
// UDP and the name servers of /etc/resolv.conf.
func noWayAround(f *fixture) spec {
	addr, token := tcpListener(f.t)
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	udp, udpToken := udpEcho(f.t)
	steps := []step{deny("tcp-connect", addr), deny("udp-send", udp)}
	tokens := []string{token, udpToken}
	// Only reachable, to a program that does not use the proxy, by
	// leaving the sandbox's network: "network is unreachable".
	var offLoopback []int
	if ip := hostAddress(); ip != "" {
		tcp, tcpToken := tcpListenerOn(f.t, ip)
		udp, udpToken := udpEchoOn(f.t, ip)
		offLoopback = []int{len(steps), len(steps) + 1}
		steps = append(steps, deny("tcp-connect", tcp), deny("udp-send", udp))
		tokens = append(tokens, tcpToken, udpToken)
	} else {
		f.t.Log("this host has no address outside the loopback: only the loopback and DNS are tried")
	}
	const name = "example.com"
	dnsAt := len(steps)
	steps = append(steps, deny("dns-lookup", name))
	return spec{
		policy: allowPolicy(allowEntry(allowedName, p)),
		steps:  steps,
		after: func(t *testing.T, s *session) {
			for _, tok := range tokens {
				if strings.Contains(s.stdout, tok) {
					t.Errorf("a host listener answered the sandbox directly (%s):\n%s", tok, s)
				}
			}
			for _, i := range offLoopback {
				if e := s.outcomes[i].Errno; e != "ENETUNREACH" && e != "EHOSTUNREACH" {
					t.Errorf("%v: want it unreachable from the sandbox's network (ENETUNREACH), got %s", s.outcomes[i], e)
				}
			}
			dns := s.outcomes[dnsAt]
			if notFound, _ := detailMap(dns)["not_found"].(bool); notFound {
				t.Errorf("dns-lookup %s: a name server answered the sandbox: %v", name, dns)
			}
			if !hostResolverAnswers(name) {
				t.Logf("the host's own name servers do not answer for %s either: the dns-lookup step shows less here", name)
			}
		},
	}
}
