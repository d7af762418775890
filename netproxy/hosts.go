package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
)

// ParseHosts reads a hosts file ("ADDRESS NAME [NAME...]" per line, '#'
// to the end of a line a comment, blank lines ignored) into a map for
// Config.Pinned. Names are lower-cased and lose a trailing dot; a name
// listed on several lines gets every address, in file order. A bad address
// or name is an error naming its line, since a silently skipped entry
// would send its name to DNS instead.
func ParseHosts(r io.Reader) (map[string][]netip.Addr, error) {
	hosts := make(map[string][]netip.Addr)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<10)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil {
			return nil, fmt.Errorf("hosts line %d: %q is not an IP address", line, fields[0])
		}
		if len(fields) == 1 {
			return nil, fmt.Errorf("hosts line %d: address %s has no names", line, addr)
		}
		for _, f := range fields[1:] {
			name, why := canonicalName(f)
			if why != "" {
				return nil, fmt.Errorf("hosts line %d: %q %s", line, printable(f), why)
			}
			if !slices.Contains(hosts[name], addr) {
				hosts[name] = append(hosts[name], addr)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hosts line %d: %w", line+1, err)
	}
	return hosts, nil
}
