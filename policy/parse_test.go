package policy

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestParseAllow(t *testing.T) {
	tests := []struct {
		in   string
		host string
		port uint32
	}{
		{"example.org", "example.org", 0},
		{"example.org:443", "example.org", 443},
		{"Example.org.:443", "Example.org.", 443},
		{"*.example.org", "*.example.org", 0},
		{"*.example.org:443", "*.example.org", 443},
		{"10.0.0.1", "10.0.0.1", 0},
		{"10.0.0.1:8080", "10.0.0.1", 8080},
		{"localhost:1", "localhost", 1},
		{"a.example.org:65535", "a.example.org", 65535},
		{"::1", "::1", 0},
		{"2001:db8::8080", "2001:db8::8080", 0},
		{"[::1]", "::1", 0},
		{"[::1]:8080", "::1", 8080},
		{"[2001:db8::1]:443", "2001:db8::1", 443},
	}
	for _, tt := range tests {
		got, err := ParseAllow(tt.in)
		if err != nil {
			t.Errorf("ParseAllow(%q): %v", tt.in, err)
			continue
		}
		if want := (&sandboxdv1.NetworkAllow{Host: tt.host, Port: tt.port}); !proto.Equal(got, want) {
			t.Errorf("ParseAllow(%q) = %v, want %v", tt.in, got, want)
		}
		if err := Validate(&sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{got}}}); err != nil {
			t.Errorf("ParseAllow(%q) = %v, which Validate rejects: %v", tt.in, got, err)
		}
	}
}

func TestParseAllowRejects(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", "no host"},
		{":443", "no host"},
		{"example.org:", `port ""`},
		{"example.org:0", `port "0" is not a number from 1 to 65535`},
		{"example.org:65536", `port "65536"`},
		{"example.org:-1", `port "-1"`},
		{"example.org:+1", `port "+1"`},
		{"example.org:https", `port "https"`},
		{"*.org:443", `top-level domain "org"`},
		{"*", "every name"},
		{"*:443", "every name"},
		{"*.localhost", "top-level domain"},
		{"*.0.0.1:80", "IP address"},
		{"a..b", "empty label"},
		{"10.0.0.1.:80", "write 10.0.0.1"},
		{"fe80::1%eth0", "zone"},
		{"[fe80::1%eth0]:80", "zone"},
		{"[::1", "no closing bracket"},
		{"[::1]443", `unexpected "443"`},
		{"[::1]:", `port ""`},
		{"[::1]:0", `port "0"`},
		{"[10.0.0.1]:80", "only for an IPv6 literal"},
		{"[example.org]:80", "only for an IPv6 literal"},
		{"https://example.org", "a URL"},
		{"example.org/x", "contains '/'"},
		{"exa mple.org", "contains ' '"},
	}
	for _, tt := range tests {
		got, err := ParseAllow(tt.in)
		if err == nil {
			t.Errorf("ParseAllow(%q) = %v, want an error", tt.in, got)
			continue
		}
		// The error names the input, so a command line with several
		// entries shows which one is wrong.
		if !strings.HasPrefix(err.Error(), `"`+tt.in+`": `) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAllow(%q): %q, want it to start with the input and contain %q", tt.in, err, tt.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"0", 0},
		{"0K", 0},
		{"100", 100},
		{"100B", 100},
		{"100b", 100},
		{"512K", 512 << 10},
		{"512k", 512 << 10},
		{"64M", 64 << 20},
		{"64MB", 64 << 20},
		{"64MiB", 64 << 20},
		{"64mib", 64 << 20},
		{"64Mi", 64 << 20},
		{"1G", 1 << 30},
		{"1.5G", 3 << 29},
		{"1.5g", 3 << 29},
		{"0.5K", 512},
		{"1.1K", 1126}, // 1126.4, rounded down
		{"0.0009765625K", 1},
		{"0.0009765624K", 0},
		{"2T", 2 << 40},
		{"007M", 7 << 20},
		{"16777215T", 16777215 << 40},
		{"16777215.999999999999999999T", 1<<64 - 1},
		{"18446744073709551615", 1<<64 - 1},
		{"18446744073709551615B", 1<<64 - 1},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeRejects(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", "not a size"},
		{"M", "not a size"},
		{".5M", "not a size"},
		{"1.M", "not a size"},
		{"1.2.3M", "not a size"},
		{"+1M", "not a size"},
		{" 1M", "not a size"},
		{"-1", "negative"},
		{"-1M", "negative"},
		{"1X", `unknown unit "X"`},
		{"1 M", `unknown unit " M"`},
		{"1e6", `unknown unit "e6"`},
		{"1P", `unknown unit "P"`},
		{"1iB", `unknown unit "iB"`},
		{"1i", `unknown unit "i"`},
		{"1MBi", `unknown unit "MBi"`},
		{"1BB", `unknown unit "BB"`},
		{"1M ", `unknown unit "M "`},
		{"1.5", "no fraction"},
		{"1.5B", "no fraction"},
		{"18446744073709551616", "too large"},
		{"16777216T", "too large"},
		{"16777215.99999999999999999999T", "more than 19 digits"},
		{"99999999999999999999999K", "too large"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", tt.in, got)
			continue
		}
		if !strings.HasPrefix(err.Error(), `"`+tt.in+`": `) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSize(%q): %q, want it to start with the input and contain %q", tt.in, err, tt.want)
		}
	}
}
