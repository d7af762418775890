package policy

import "testing"

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
	}
	for _, tt := range tests {
		if got := MatchHost(tt.pattern, tt.host); got != tt.want {
			t.Errorf("MatchHost(%q, %q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
		}
	}
}
