package policy

import (
	"fmt"
	"net/netip"
	"strings"
)

// MatchHost reports whether the network.allow host pattern admits host. This
// is the one definition of the pattern language: a pattern is a host name or
// an IP literal, matched exactly (names case-insensitively), or "*.suffix",
// which admits any name with at least one more label before ".suffix" (so
// "*.example.com" admits "a.b.example.com" but not "example.com"). A
// wildcard never admits an IP literal. host may itself be a pattern, in
// which case MatchHost reports whether pattern admits every name host does.
func MatchHost(pattern, host string) bool {
	pattern, host = canonicalHost(pattern), canonicalHost(host)
	if pattern == host {
		return true
	}
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	return strings.HasSuffix(host, suffix)
}

// checkHost returns why h is not a valid network.allow host, or "".
func checkHost(h string) string {
	if h == "" {
		return "host is empty"
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || c == '/' {
			// Non-ASCII names must be given in their IDNA (xn--) form, the
			// form a proxy sees on the wire; anything else could never match.
			return fmt.Sprintf("host %q contains %q; use an ASCII name (xn-- form for international names), an IP literal or *.domain", h, c)
		}
	}
	if strings.Contains(h, ":") {
		// An IPv6 literal; anything else with a colon is most likely
		// "host:port", which belongs in port.
		if _, err := netip.ParseAddr(h); err != nil {
			return fmt.Sprintf("host %q is neither a name nor an IP literal (put a port in the port field)", h)
		}
		return ""
	}
	rest, _ := strings.CutPrefix(h, "*.")
	if rest == "" || strings.Contains(rest, "*") {
		return fmt.Sprintf("host %q: a wildcard is only allowed as the whole first label, as in *.example.com", h)
	}
	return ""
}

// canonicalHost is the form hosts are compared and stored in: IP literals in
// their canonical text, names in lower case.
func canonicalHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String()
	}
	return strings.ToLower(h)
}
