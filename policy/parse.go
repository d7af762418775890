package policy

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// ParseAllow parses a network.allow entry written as on a command line,
// "PATTERN[:PORT]": "example.org", "*.example.org:443", "10.0.0.1:8080",
// "[::1]:8080". A bare IPv6 literal such as "::1" takes no port, since its
// own colons leave no way to tell one; put it in brackets to give a port.
// Without a port the entry allows every port; a given port is 1 to 65535.
// PATTERN must pass the checks Validate makes on network.allow hosts, and
// is returned as written (Normalize puts it in canonical form). Errors
// start with s, quoted.
func ParseAllow(s string) (*sandboxdv1.NetworkAllow, error) {
	if strings.Contains(s, "://") {
		return nil, fmt.Errorf("%q: a URL, not a host; write the host and port alone, as in example.org:443", s)
	}
	host, port, hasPort := s, "", false
	if inner, ok := strings.CutPrefix(s, "["); ok {
		addr, rest, ok := strings.Cut(inner, "]")
		if !ok {
			return nil, fmt.Errorf("%q: no closing bracket; write [IPV6]:PORT, as in [::1]:443", s)
		}
		if a, err := netip.ParseAddr(addr); err != nil || !a.Is6() {
			return nil, fmt.Errorf("%q: brackets are only for an IPv6 literal, as in [::1]:443; write names and IPv4 addresses without them", s)
		}
		if rest != "" {
			if port, hasPort = strings.CutPrefix(rest, ":"); !hasPort {
				return nil, fmt.Errorf("%q: unexpected %q after the bracket; write [IPV6]:PORT, as in [::1]:443", s, rest)
			}
		}
		host = addr
	} else if strings.Count(s, ":") == 1 {
		host, port, hasPort = strings.Cut(s, ":")
	}
	if host == "" {
		return nil, fmt.Errorf("%q: no host; write PATTERN[:PORT], as in example.org:443 or *.example.org", s)
	}
	if msg := checkHost(host); msg != "" {
		return nil, fmt.Errorf("%q: %s", s, msg)
	}
	a := &sandboxdv1.NetworkAllow{Host: host}
	if hasPort {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q: port %q is not a number from 1 to %d; write PATTERN:PORT, or leave out \":PORT\" for every port", s, port, maxPort)
		}
		a.Port = uint32(n)
	}
	return a, nil
}

// sizeShifts are the binary powers ParseSize's units stand for.
var sizeShifts = map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}

// ParseSize parses a byte count written as on a command line: a decimal
// number and an optional unit K, M, G or T, which may be followed by "i",
// "B" or both, in any case: "100", "512K", "64MiB", "1.5g". Every unit is
// binary, whichever way it is spelt: "64MB" is 64 MiB, 67108864 bytes,
// because that is what people mean by a memory size and a limit about 5%
// below the intended one would be a trap. A fraction needs a unit and the
// result is rounded down to a whole byte. "0" is 0; whether that is
// acceptable is the caller's business. Errors start with s, quoted.
func ParseSize(s string) (uint64, error) {
	const want = "write a number of bytes, optionally with a unit K, M, G or T, as in 64M or 1.5G"
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q: a size cannot be negative; %s", s, want)
	}
	end := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(s)
	}
	num, unit := s[:end], strings.ToUpper(s[end:])
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" || (hasFrac && (frac == "" || strings.Contains(frac, "."))) {
		return 0, fmt.Errorf("%q: not a size; %s", s, want)
	}
	unit = strings.TrimSuffix(unit, "B")
	prefix, binary := strings.CutSuffix(unit, "I")
	shift, ok := sizeShifts[prefix]
	if !ok || (binary && prefix == "") {
		return 0, fmt.Errorf("%q: unknown unit %q; %s", s, s[end:], want)
	}
	if hasFrac && shift == 0 {
		return 0, fmt.Errorf("%q: a byte count has no fraction; write whole bytes or use a unit, as in 1.5K", s)
	}
	tooLarge := func() error { return fmt.Errorf("%q: too large; the largest size is %d bytes", s, uint64(1<<64-1)) }
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		return 0, tooLarge()
	}
	hi, n := bits.Mul64(w, 1<<shift)
	if hi != 0 {
		return 0, tooLarge()
	}
	if hasFrac {
		// 10^19 is the largest power of ten a uint64 holds.
		if len(frac) > 19 {
			return 0, fmt.Errorf("%q: more than 19 digits after the point; %s", s, want)
		}
		f, _ := strconv.ParseUint(frac, 10, 64)
		pow := uint64(1)
		for range len(frac) {
			pow *= 10
		}
		// f < pow, so f<<shift / pow < 1<<shift fits, and Div64 cannot
		// panic because the high word is below pow.
		fhi, flo := bits.Mul64(f, 1<<shift)
		q, _ := bits.Div64(fhi, flo, pow)
		// n is a multiple of 1<<shift that fits and q is below 1<<shift,
		// so the sum fits too.
		n += q
	}
	return n, nil
}
