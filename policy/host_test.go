package policy

import (
	"strings"
	"testing"
)

func TestMatchHost(t *testing.T) {
	tests := []struct {
		pattern, host string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"Example.COM", "example.com", true},
		{"example.com", "www.example.com", false},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "*.sub.example.com", true},
		{"*.sub.example.com", "*.example.com", false},
		{"*.example.com", "*.com", false},
		{"10.0.0.1", "10.0.0.1", true},
		{"::1", "0:0::1", true},
		{"*.0.1", "10.0.0.1", false},
		{"*.1", "::1", false},
		{"example.com.", "example.com", true},
		{"example.com", "EXAMPLE.com.", true},
		{"*.example.com.", "a.example.com", true},
		{"*.example.com", "a.example.com.", true},
		{"*.example.com", "example.com.", false},
		{"example.com", "example.com..", false},
		{"10.0.0.1", "10.0.0.1.", false},
		{"10.0.0.1.", "10.0.0.1", false},
	}
	for _, tt := range tests {
		if got := MatchHost(tt.pattern, tt.host); got != tt.want {
			t.Errorf("MatchHost(%q, %q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	valid := []string{
		"example.org", "Example.ORG", "example.org.", "*.example.org", "*.example.org.", "*.a.b.example.org",
		"localhost", "localhost.", "xn--bcher-kva.de", "_acme.example.org", "a-b.example.org", "1.example.org",
		"10.0.0.1", "::1", "2001:db8::1", "::ffff:10.0.0.1",
		strings.Repeat("a", 63) + ".org",
		strings.Repeat("a.", 126) + "a", // 253 characters
		strings.Repeat("a.", 126) + "a.",
	}
	for _, h := range valid {
		if msg := checkHost(h); msg != "" {
			t.Errorf("checkHost(%q) = %q, want valid", h, msg)
		}
	}
	invalid := []struct {
		host string
		want []string // substrings of the message: what is wrong and what to write
	}{
		{"", []string{"empty"}},
		{"*", []string{`"*"`, "every name", "network mode HOST", "*.example.com"}},
		{"*.", []string{`"*."`, "every name"}},
		{"*.org", []string{`"*.org"`, `top-level domain "org"`, "*.example.org"}},
		{"*.com", []string{`"*.com"`, "*.example.com"}},
		{"*.localhost", []string{`"*.localhost"`, "*.example.localhost"}},
		{"*.test", []string{`"*.test"`, "top-level domain"}},
		{"*.org.", []string{`"*.org."`, "top-level domain"}},
		{"*.0.0.1", []string{`"*.0.0.1"`, "IP address", "IP literals"}},
		{"*.1", []string{`"*.1"`, "IP address"}},
		{"*.example.0x7f", []string{"IP address"}},
		{"127.1", []string{`"127.1"`, "ends in a number", "IP literal"}},
		{"0x7f.0.0.1", []string{"ends in a number"}},
		{"010.0.0.1", []string{"ends in a number"}},
		{"1.2.3.4.5", []string{"ends in a number"}},
		{"0", []string{"ends in a number"}},
		{"10.0.0.1.", []string{`"10.0.0.1."`, "trailing dot", "write 10.0.0.1"}},
		{"a..b", []string{`"a..b"`, "empty label", "example.com"}},
		{".example.org", []string{"empty label"}},
		{"example.org..", []string{"empty label"}},
		{"*..example.org", []string{"empty label"}},
		{".", []string{`"."`, "no name", "example.com"}},
		{strings.Repeat("a", 64) + ".org", []string{"label of 64 characters", "63"}},
		{strings.Repeat("a.", 126) + "ab", []string{"254 characters", "253"}},
		{"a.*.com", []string{"whole first label"}},
		{"*a.example.com", []string{"whole first label"}},
		{"**.example.com", []string{"whole first label"}},
		{"example.*", []string{"whole first label"}},
		{"fe80::1%eth0", []string{`"fe80::1%eth0"`, "zone", "as fe80::1"}},
		{"[::1]", []string{`"[::1]"`, "brackets", "as ::1"}},
		{"[::1]:443", []string{"brackets", "port field"}},
		{"[example.com]", []string{"brackets", "::1"}},
		{"example.com:443", []string{`"example.com:443"`, `write host "example.com"`, "443 in the port field"}},
		{"a:b:c", []string{"neither a name nor an IP literal"}},
		{"bücher.de", []string{"xn--"}},
		{"a@b.example.org", []string{`"a@b.example.org"`, "contains '@'", "letters, digits"}},
		{"a%b.example.org", []string{"contains '%'"}},
		{"*.exa+mple.org", []string{"contains '+'"}},
		{"[example.org", []string{"brackets"}},
	}
	for _, tt := range invalid {
		msg := checkHost(tt.host)
		if msg == "" {
			t.Errorf("checkHost(%q) = valid, want an error", tt.host)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("checkHost(%q) = %q, want it to contain %q", tt.host, msg, w)
			}
		}
	}
}

func TestCanonicalHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Example.ORG", "example.org"},
		{"example.org.", "example.org"},
		{"*.Example.org.", "*.example.org"},
		{"0:0::1", "::1"},
		{"10.0.0.1", "10.0.0.1"},
		// Not an address, so it must not become one.
		{"10.0.0.1.", "10.0.0.1."},
	}
	for _, tt := range tests {
		got := canonicalHost(tt.in)
		if got != tt.want {
			t.Errorf("canonicalHost(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := canonicalHost(got); again != got {
			t.Errorf("canonicalHost(%q) = %q, not a fixed point", got, again)
		}
		if checkHost(tt.in) == "" && checkHost(got) != "" {
			t.Errorf("canonicalHost(%q) = %q, which is invalid: %s", tt.in, got, checkHost(got))
		}
	}
}
