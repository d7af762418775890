package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// target is a host and port a client asked for, after validation.
type target struct {
	name string     // canonical name (lower case, no trailing dot), or ""
	addr netip.Addr // the IP literal the client named, when name is ""
	port uint16
}

func (t target) host() string {
	if t.name != "" {
		return t.name
	}
	return t.addr.String()
}

// String is the "host:port" form denials and error messages show.
func (t target) String() string {
	return net.JoinHostPort(t.host(), strconv.Itoa(int(t.port)))
}

// denied is a refusal on policy grounds; it becomes a Denial event, HTTP
// 403 (400 when the target is malformed) and SOCKS reply 0x02. A refusal
// for a quota of connections held open (busy) passes as others close: it
// is HTTP 503 with Retry-After and SOCKS reply 0x01 instead: a temporary
// failure, where 403 and reply 0x02 say the policy forbids the target.
type denied struct {
	target    string // host:port, printable ASCII
	field     string // what refused it; "" is network.allow
	detail    string
	malformed bool
	busy      bool
}

func (d *denied) fieldName() string {
	if d.field == "" {
		return "network.allow"
	}
	return d.field
}

func (d *denied) Error() string { return d.target + " " + d.detail }

// upstreamError is a failure to reach an allowed target.
type upstreamError struct {
	resolving bool // failed resolving the name, not connecting
	target    string
	err       error
}

func (e *upstreamError) Error() string {
	if e.resolving {
		return "resolving " + e.target + ": " + e.err.Error()
	}
	return "connecting to " + e.target + ": " + e.err.Error()
}

func (e *upstreamError) Unwrap() error { return e.err }

func (e *upstreamError) timeout() bool {
	var ne net.Error
	return errors.Is(e.err, context.DeadlineExceeded) || errors.As(e.err, &ne) && ne.Timeout()
}

// checkError is the proxy's own failure to check a target (listing the
// host's addresses failed: EMFILE, say). The target is refused, but not by
// the policy: no Denial, and the daemon's log says why.
type checkError struct {
	target string
	err    error
}

func (e *checkError) Error() string { return "checking " + e.target + ": " + e.err.Error() }

func (e *checkError) Unwrap() error { return e.err }

// parseTarget validates a host (without brackets) and a decimal port as a
// client sent them. Whatever fails here could never match network.allow,
// and is refused before matching so that odd spellings of a name or an
// address cannot slip past the comparison.
func parseTarget(host, port string) (target, error) {
	bad := func(detail string) (target, error) {
		return target{}, &denied{target: net.JoinHostPort(printable(host), printable(port)), detail: detail, malformed: true}
	}
	var t target
	switch p, err := strconv.ParseUint(port, 10, 16); {
	case port == "":
		return bad("has no port")
	case err != nil:
		return bad("has an invalid port")
	case p == 0:
		return bad("has port 0")
	default:
		t.port = uint16(p)
	}
	if host == "" {
		return bad("has an empty host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			// A zone names an interface of the daemon's host, which no
			// policy entry can mean.
			return bad("has an IPv6 zone")
		}
		t.addr = a
		return t, nil
	}
	name, why := canonicalName(host)
	if why != "" {
		return bad(why)
	}
	t.name = name
	return t, nil
}

// canonicalName returns h in lower case without its trailing dot, or why
// h is not a DNS name this proxy will look up.
func canonicalName(h string) (string, string) {
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if name == "" {
		return "", "has an empty host"
	}
	if len(name) > 253 {
		return "", "has a host name longer than 253 characters"
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", "has a host name with an empty or over-long label"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", "has a host name with characters outside [a-z0-9-_.]"
			}
		}
	}
	if policy.IsNumericLabel(labels[len(labels)-1]) {
		// Resolvers read "127.1", "0x7f.1" or "10.0.0.1." as IPv4
		// addresses; such a "name" would reach an address that no IP
		// literal in the policy names.
		return "", "has a host name ending in a number (not a valid IP literal)"
	}
	return name, ""
}

// printable makes client-supplied text safe for a header value, a log
// line and a protobuf string (which must be UTF-8).
func printable(s string) string {
	const limit = 255
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if b.Len() >= limit {
			b.WriteString("...")
			break
		}
		c := s[i]
		if c < ' ' || c >= 0x7f {
			c = '?'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// allowed reports whether network.allow admits t.
func (s *Server) allowed(t target) bool {
	hosts := []string{t.host()}
	switch {
	case t.addr.Is4In6():
		// ::ffff:10.0.0.1 and 10.0.0.1 are one destination; either
		// spelling in the policy admits either in the request.
		hosts = append(hosts, t.addr.Unmap().String())
	case t.addr.Is4():
		hosts = append(hosts, netip.AddrFrom16(t.addr.As16()).String())
	}
	for _, r := range s.rules {
		if r.port != 0 && r.port != uint32(t.port) {
			continue
		}
		for _, h := range hosts {
			if policy.MatchHost(r.host, h) {
				return true
			}
		}
	}
	return false
}

// open checks t (or reports perr, the reason it could not be parsed),
// resolves and connects, and reports a Denial for every policy refusal.
// op is the Denial's Operation.
func (s *Server) open(op string, t target, perr error) (net.Conn, error) {
	err := perr
	var c net.Conn
	if err == nil {
		c, err = s.connect(t)
	}
	s.report(op, err)
	return c, err
}

// report makes a Denial of err if it is a refusal, and logs it if it is
// the proxy's own failure. op is the Denial's Operation.
func (s *Server) report(op string, err error) {
	var ce *checkError
	if errors.As(err, &ce) {
		s.logCheckFailure(op, err)
	}
	var d *denied
	if errors.As(err, &d) && s.cfg.OnDenial != nil {
		s.cfg.OnDenial(&sandboxdv1.Denial{
			Time:      timestamppb.Now(),
			Field:     d.fieldName(),
			Operation: op,
			Target:    d.target,
			Errno:     "EACCES",
			Detail:    d.detail,
		})
	}
}

// connect is the one way out of the sandbox: policy first, so that a
// refused name is never even looked up (a lookup alone would carry data
// out through DNS), then the proxy's own resolution, then a dial to the
// addresses it found, never to a name.
func (s *Server) connect(t target) (net.Conn, error) {
	if !s.allowed(t) {
		return nil, &denied{target: t.String(), detail: "not in network.allow"}
	}
	if err := s.charge(t.String()); err != nil {
		return nil, err
	}
	tracked := false
	defer func() {
		if !tracked {
			s.refund()
		}
	}()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DialTimeout)
	defer cancel()
	addrs, err := s.resolve(ctx, t)
	if err != nil {
		return nil, err
	}
	var first error
	for i, a := range addrs {
		dctx, dcancel := partialDeadline(ctx, len(addrs)-i)
		c, err := s.dial(dctx, "tcp", netip.AddrPortFrom(a.Unmap(), t.port).String())
		dcancel()
		if err == nil {
			// track refunds what it does not keep.
			tracked = true
			if !s.track(c) {
				return nil, &upstreamError{target: t.String(), err: net.ErrClosed}
			}
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &upstreamError{target: t.String(), err: first}
}

func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.cfg.Dial != nil {
		return s.cfg.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// partialDeadline gives one of n remaining connection attempts its share
// of the time left, as net.Dialer does, so that one black-holed address
// does not use up the time meant for the others.
func partialDeadline(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || n <= 1 {
		return context.WithCancel(ctx)
	}
	left := time.Until(deadline)
	const floor = 2 * time.Second
	share := left / time.Duration(n)
	if share < floor {
		share = min(floor, left)
	}
	return context.WithTimeout(ctx, share)
}

// checkLogEvery is how often targets the proxy could not check are
// logged.
const checkLogEvery = 5 * time.Second

// checkLog throttles the lines about targets the proxies could not check,
// the others counted: a sandbox can ask at the rate it likes, such a
// refusal is no denial (which is rate limited), and the failure behind it
// (listing the host's addresses) is every proxy's at once.
var checkLog struct {
	sync.Mutex
	logged   time.Time
	unlogged int
}

// logCheckFailure logs err, a target refused because it could not be
// checked, unless such a line was logged within checkLogEvery; the next
// line logged says how many were not.
func (s *Server) logCheckFailure(op string, err error) {
	checkLog.Lock()
	now := time.Now()
	if !checkLog.logged.IsZero() && now.Sub(checkLog.logged) < checkLogEvery {
		checkLog.unlogged++
		checkLog.Unlock()
		return
	}
	n := checkLog.unlogged
	checkLog.logged, checkLog.unlogged = now, 0
	checkLog.Unlock()
	if n > 0 {
		s.logf("netproxy: refused %s: %v (and %d more refused so by this daemon's proxies since the last such line)", op, err, n)
		return
	}
	s.logf("netproxy: refused %s: %v", op, err)
}

// resolve returns the addresses to dial for an allowed target.
func (s *Server) resolve(ctx context.Context, t target) ([]netip.Addr, error) {
	if t.name == "" {
		// The policy named this address itself.
		return []netip.Addr{t.addr}, nil
	}
	if addrs, ok := s.pinned[t.name]; ok && len(addrs) > 0 {
		return addrs, nil
	}
	addrs, err := s.resolver.LookupNetIP(ctx, "ip", lookupName(t.name))
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, &upstreamError{resolving: true, target: t.name, err: err}
	}
	for i, a := range addrs {
		// net.Resolver returns A records as IPv4-mapped IPv6 addresses.
		addrs[i] = a.Unmap()
		if kind := internalKind(addrs[i], s.cfg.NAT64Prefix); kind != "" {
			return nil, &denied{target: t.String(), detail: fmt.Sprintf("resolves to %s address %s", kind, addrs[i])}
		}
	}
	// Only once no address is refused by kind: a failure to list the
	// host's addresses must not hide a rebinding refusal.
	for _, a := range addrs {
		own, err := ownAddr(a, s.cfg.NAT64Prefix)
		if err != nil {
			return nil, &checkError{target: t.String(), err: fmt.Errorf("comparing %s with the daemon host's own addresses: %w", a, err)}
		}
		switch {
		case own == a:
			return nil, &denied{target: t.String(), detail: fmt.Sprintf("resolves to the daemon host's own address %s", own)}
		case own.IsValid():
			return nil, &denied{target: t.String(), detail: fmt.Sprintf("resolves to NAT64 address %s of the daemon host's own address %s", a, own)}
		}
	}
	return addrs, nil
}

// ownAddr returns a, or an IPv4 address a embeds as NAT64, if it is one of
// the daemon host's own addresses: a NAT64 gateway would lead back to the
// host through it.
func ownAddr(a netip.Addr, nat64 netip.Prefix) (netip.Addr, error) {
	v4s, _ := nat64Embedded(a, nat64)
	for _, c := range append([]netip.Addr{a}, v4s...) {
		own, err := hostAddrs.has(c)
		if err != nil || own {
			return c, err
		}
	}
	return netip.Addr{}, nil
}

// lookupName is how name is asked of the resolver. A name of several
// labels is rooted, so that no resolv.conf search domain is tried first:
// with ndots:5 (Kubernetes' default) "api.example.com" would otherwise
// resolve as api.example.com.<namespace>.svc.cluster.local, or through a
// search domain's wildcard, to a host the policy never named. A single
// label is left as it is: rooted it would be a top-level domain, and the
// hosts file (where "localhost" is) matches it only unrooted, so a policy
// naming one means the host's short name.
func lookupName(name string) string {
	if strings.Contains(name, ".") {
		return name + "."
	}
	return name
}

// hostAddrs are the addresses of the daemon host's interfaces. A service
// there that listens on every address (0.0.0.0) is reached through each of
// them from the daemon's network namespace, where the proxy dials, as
// through the loopback.
var hostAddrs = &addrCache{list: net.InterfaceAddrs, ttl: 5 * time.Second}

// addrCache keeps a listing of addresses for ttl, since a lookup per
// connection would ask the kernel for every interface each time.
type addrCache struct {
	list func() ([]net.Addr, error)
	ttl  time.Duration

	mu  sync.Mutex
	at  time.Time
	set map[netip.Addr]bool
}

// has reports whether a is in the listing, refreshed when older than ttl.
func (c *addrCache) has(a netip.Addr) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil || time.Since(c.at) >= c.ttl {
		addrs, err := c.list()
		if err != nil {
			c.set = nil
			return false, fmt.Errorf("listing interface addresses: %w", err)
		}
		set := make(map[netip.Addr]bool, len(addrs))
		for _, na := range addrs {
			if p, err := netip.ParsePrefix(na.String()); err == nil {
				set[p.Addr().Unmap().WithZone("")] = true
			} else if ip, err := netip.ParseAddr(na.String()); err == nil {
				set[ip.Unmap().WithZone("")] = true
			}
		}
		c.set, c.at = set, time.Now()
	}
	return c.set[a.Unmap()], nil
}

// internalKind says which kind of host-internal address a is, or "" if it
// is none. A name that DNS maps to one of these would let a sandbox reach
// the daemon's own host (its loopback services, the cloud metadata
// endpoint at 169.254.169.254) through a name the policy allows: DNS
// rebinding. Every address of a name is checked, and one internal address
// refuses the whole name, since skipping it would still let the sandbox
// probe which names point where.
//
// Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) are deliberately
// not refused: internal package registries and services that policies name
// live there, and reaching them is what allowing their names means.
//
// nat64 is the operator's NAT64 prefix (Config.NAT64Prefix, as New
// checked it), if any.
func internalKind(a netip.Addr, nat64 netip.Prefix) string {
	a = a.Unmap()
	if kind := nat64Kind(a, nat64); kind != "" {
		return kind
	}
	switch {
	case cloudMetadata[a]:
		// The instance metadata services outside link-local: they hand
		// out the host's cloud credentials.
		return "cloud metadata"
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		// Connecting to 0.0.0.0 (or anything in 0/8 on some kernels)
		// reaches the local host.
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "link-local multicast"
	case a.IsMulticast():
		return "multicast"
	}
	return ""
}

var cloudMetadata = map[netip.Addr]bool{
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS, IPv6 (in fc00::/7, otherwise allowed)
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud (in 100.64/10)
}

// NAT64 prefixes: 64:ff9b::/96 (RFC 6052) and the local-use 64:ff9b:1::/48
// (RFC 8215), within which an operator picks the prefix length.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")
)

// nat64Kind says which kind of host-internal IPv4 address the NAT64
// address a leads to, or "" if none (or a is not NAT64). Every IPv4
// address a may embed is checked, and one internal one refuses a.
func nat64Kind(a netip.Addr, nat64 netip.Prefix) string {
	v4s, guessed := nat64Embedded(a, nat64)
	unspecified := 0
	for _, v4 := range v4s {
		kind := internalKind(v4, netip.Prefix{})
		if guessed && kind == "unspecified" {
			// A reading at another length than the prefix's reads its
			// zero bits as 0/8, and translators do not translate to
			// 0/8 ("this network", RFC 6890).
			unspecified++
			continue
		}
		if kind != "" {
			return "NAT64 " + kind
		}
	}
	if guessed && unspecified == len(v4s) {
		// No reading is another address: 0/8 is what it leads to.
		return "NAT64 unspecified"
	}
	return ""
}

// nat64Embedded returns the IPv4 addresses the NAT64 address a may embed,
// none if a is not NAT64. Under the well-known 64:ff9b::/96 and under
// nat64, the operator's prefix, there is one: the RFC 6052 reading at
// that prefix's length. Under the local-use 64:ff9b:1::/48 otherwise the
// prefix may be 48, 56, 64 or 96 bits long and the proxy does not know
// which, so every reading is returned (guessed), each whatever the u octet
// and the suffix hold, since translators ignore those bits.
func nat64Embedded(a netip.Addr, nat64 netip.Prefix) (v4s []netip.Addr, guessed bool) {
	if !a.Is6() {
		return nil, false
	}
	b := a.As16()
	switch {
	case nat64WellKnown.Contains(a):
		return []netip.Addr{embeddedAt(b, 96)}, false
	case nat64.IsValid() && nat64.Contains(a):
		return []netip.Addr{embeddedAt(b, nat64.Bits())}, false
	case !nat64Local.Contains(a):
		return nil, false
	}
	for _, bits := range []int{48, 56, 64, 96} {
		v4s = append(v4s, embeddedAt(b, bits))
	}
	return v4s, true
}

// embeddedAt reads the IPv4 address that RFC 6052 (section 2.2) places
// after a prefix of bits (32, 40, 48, 56, 64 or 96), skipping bits 64 to
// 71 (the u octet).
func embeddedAt(b [16]byte, bits int) netip.Addr {
	var v4 [4]byte
	i := bits / 8
	for n := range v4 {
		if i == 8 {
			i++
		}
		v4[n] = b[i]
		i++
	}
	return netip.AddrFrom4(v4)
}

// NAT64PrefixLengths are the prefix lengths RFC 6052 defines.
var NAT64PrefixLengths = []int{32, 40, 48, 56, 64, 96}

// CheckNAT64Prefix says why p cannot be a network's NAT64 prefix
// (Config.NAT64Prefix): an IPv6 prefix of an RFC 6052 length, with no bits
// set beyond it, that neither overlaps the well-known 64:ff9b::/96 (which
// is /96 alone, RFC 6052 section 3.1) nor takes in the whole local-use
// 64:ff9b:1::/48, whose every reading it would replace.
func CheckNAT64Prefix(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return errors.New("not a prefix")
	case !p.Addr().Is6() || p.Addr().Is4In6():
		return fmt.Errorf("%s is not an IPv6 prefix", p)
	case !slices.Contains(NAT64PrefixLengths, p.Bits()):
		return fmt.Errorf("%s: the length must be one of %v (RFC 6052)", p, NAT64PrefixLengths)
	case p.Masked() != p:
		return fmt.Errorf("%s has bits set beyond its length (%s)", p, p.Masked())
	case p.Overlaps(nat64WellKnown):
		return fmt.Errorf("%s overlaps the well-known prefix %s, which is read at /96 alone", p, nat64WellKnown)
	case p.Bits() < nat64Local.Bits() && p.Overlaps(nat64Local):
		return fmt.Errorf("%s takes in all of the local-use prefix %s: name the network's prefix within it", p, nat64Local)
	}
	return nil
}

// socksReply is the SOCKS5 reply code for a failure to open a target.
func socksReply(err error) byte {
	var d *denied
	var ue *upstreamError
	var ce *checkError
	switch {
	case errors.As(err, &d) && d.busy:
		return socksFailure
	case errors.As(err, &d):
		return socksNotAllowed
	case errors.As(err, &ce):
		return socksFailure
	case errors.As(err, &ue) && ue.resolving:
		return socksHostUnreachable
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		return socksHostUnreachable
	}
	return socksFailure
}
