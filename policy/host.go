package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// nameChars are the characters of a DNS name's labels as proxies and
// resolvers accept them (letters, digits and hyphen, plus the underscore
// that service names use).
const nameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// DNS's limits on a name in text form, without its trailing dot (RFC 1035
// section 2.3.4). A longer name can never be looked up, so an entry naming
// one could only be a mistake.
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// MatchHost reports whether the network.allow host pattern admits host. This
// is the one definition of the pattern language: a pattern is a host name or
// an IP literal, matched exactly (names case-insensitively, and a name with
// one trailing dot the same as without it), or "*.suffix", which admits any
// name with at least one more label before ".suffix" (so "*.example.com"
// admits "a.b.example.com" but not "example.com"). A wildcard never admits
// an IP literal. host may itself be a pattern, in which case MatchHost
// reports whether pattern admits every name host does.
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

// checkHost returns why h is not a valid network.allow host, or "" (the
// rules are listed at Validate). Names whose last label is a number are
// refused because resolvers read "127.1" or "0x7f.1" as IPv4 addresses:
// such a name would reach an address that no IP literal in the policy
// names, and no top-level domain is numeric.
func checkHost(h string) string {
	if h == "" {
		return "host is empty; write a name, *.domain or an IP literal"
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || c == '/' {
			// Non-ASCII names must be given in their IDNA (xn--) form, the
			// form a proxy sees on the wire; anything else could never match.
			return fmt.Sprintf("host %q contains %q; use an ASCII name (xn-- form for international names), an IP literal or *.domain", h, c)
		}
	}
	if strings.HasPrefix(h, "[") || strings.Contains(h, ":") {
		return checkIPv6(h)
	}
	name, _ := strings.CutSuffix(h, ".")
	if name == "" {
		return fmt.Sprintf("host %q has no name before the dot; write a name such as example.com", h)
	}
	if a, err := netip.ParseAddr(name); err == nil {
		if name != h {
			// "10.0.0.1." is not an address to a resolver but a name to
			// look up, which DNS may answer with anything.
			return fmt.Sprintf("host %q is an IP address with a trailing dot; write %s", h, a)
		}
		return ""
	}
	if len(name) > maxNameLen {
		return fmt.Sprintf("host %q is %d characters long, above DNS's limit of %d; write the name a client connects to", h, len(name), maxNameLen)
	}
	labels := strings.Split(name, ".")
	for i, l := range labels {
		switch {
		case l == "":
			return fmt.Sprintf("host %q has an empty label; write the name without leading or doubled dots, as in example.com", h)
		case len(l) > maxLabelLen:
			return fmt.Sprintf("host %q has a label of %d characters, above DNS's limit of %d; write the name a client connects to", h, len(l), maxLabelLen)
		case strings.Contains(l, "*") && (i > 0 || l != "*"):
			return fmt.Sprintf("host %q: a wildcard is only allowed as the whole first label, as in *.example.com", h)
		case l != "*" && strings.Trim(l, nameChars) != "":
			// The proxy looks up only such names, so no other could match.
			c := strings.Trim(l, nameChars)[0]
			return fmt.Sprintf("host %q contains %q; a name has only letters, digits, '-' and '_' (xn-- form for international names)", h, c)
		}
	}
	wildcard := labels[0] == "*"
	suffix := labels
	if wildcard {
		suffix = labels[1:]
	}
	switch {
	case len(suffix) == 0:
		return fmt.Sprintf("host %q is a wildcard for every name; use network mode HOST for that, or name a domain, as in *.example.com", h)
	case IsNumericLabel(suffix[len(suffix)-1]) && wildcard:
		return fmt.Sprintf("host %q is a wildcard over what resolvers read as an IP address; list the IP literals instead, as in 10.0.0.1", h)
	case IsNumericLabel(suffix[len(suffix)-1]):
		return fmt.Sprintf("host %q ends in a number, so resolvers read it as an IP address; write the address as an IP literal, as in 10.0.0.1", h)
	case wildcard && len(suffix) == 1:
		// One label is a whole top-level domain (or a special-use one like
		// localhost): far wider than anyone allowing "a domain" means.
		return fmt.Sprintf("host %q admits every name under the top-level domain %q; name a domain under it, as in *.example.%s", h, suffix[0], suffix[0])
	}
	return ""
}

// checkIPv6 is checkHost for a host that can only be meant as an IPv6
// literal, or is a name with a port.
func checkIPv6(h string) string {
	if inner, ok := strings.CutPrefix(h, "["); ok {
		addr, _, _ := strings.Cut(inner, "]")
		if a, err := netip.ParseAddr(addr); err == nil {
			return fmt.Sprintf("host %q has brackets; write the address without them, as %s, and any port in the port field", h, a.WithZone(""))
		}
		return fmt.Sprintf("host %q is no IP literal in brackets; write a name, or an IP literal without brackets, as in ::1", h)
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		if name, port, ok := strings.Cut(h, ":"); ok && !strings.Contains(port, ":") {
			if _, err := strconv.ParseUint(port, 10, 16); err == nil {
				return fmt.Sprintf("host %q has a port; write host %q and put %s in the port field", h, name, port)
			}
		}
		return fmt.Sprintf("host %q is neither a name nor an IP literal; write a name, *.domain or an IP literal such as ::1, and put a port in the port field", h)
	}
	if a.Zone() != "" {
		// A zone names an interface of one machine: the same text means
		// another link elsewhere, and a proxy cannot honour it anyway.
		return fmt.Sprintf("host %q has an IPv6 zone; write the address without it, as %s", h, a.WithZone(""))
	}
	return ""
}

// IsNumericLabel reports whether l is a label resolvers take for part of an
// IPv4 address: decimal digits, or hexadecimal ones after 0x. This is the
// WHATWG URL standard's "ends in a number" rule. The proxy applies it to the
// names it is asked for, so that the policy and the proxy agree on what is a name.
func IsNumericLabel(l string) bool {
	digits := "0123456789"
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		l, digits = l[2:], "0123456789abcdefABCDEF"
		if l == "" {
			return true
		}
	}
	return l != "" && strings.Trim(l, digits) == ""
}

// canonicalHost is the form hosts are compared and stored in: IP literals in
// their canonical text, names in lower case without a trailing dot.
func canonicalHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String()
	}
	name := strings.TrimSuffix(h, ".")
	if _, err := netip.ParseAddr(name); err == nil {
		// "10.0.0.1." is a name to look up, not the address; it must not
		// compare equal to the address.
		return strings.ToLower(h)
	}
	return strings.ToLower(name)
}
