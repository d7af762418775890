package policy

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name      string
		policy    string
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "nil is the default", policy: ""},
		{name: "empty", policy: `{}`},
		{name: "typical", policy: `{"filesystem":{"write":["/w","/tmp/x"],"read_only":["/w/.git"],"deny":["/home/u/.ssh"]},
			"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"::1"},{"host":"10.0.0.1","port":65535}]},
			"limits":{"timeout":"90s","memory_bytes":"1048576","pids":10},"children":{"allow":true}}`},
		{name: "dotdot is cleaned", policy: `{"filesystem":{"write":["/w/../x"],"read_only":["/x/y/../z"]}}`},
		{name: "listed with roots", policy: `{"filesystem":{"read":"LISTED","read_roots":["/usr","/etc"]}}`},
		{name: "listed without roots", policy: `{"filesystem":{"read":"LISTED"}}`},
		{name: "read_only inside root slash", policy: `{"filesystem":{"write":["/"],"read_only":["/etc"]}}`},
		{name: "deny inside read_only", policy: `{"filesystem":{"write":["/w"],"read_only":["/w/a"],"deny":["/w/a/b"]}}`},
		{name: "zero timeout", policy: `{"limits":{"timeout":"0s"}}`},
		{name: "layer with carve-outs", policy: `{"filesystem":{"write":["/out"],"layer":["/w"],"read_only":["/w/.git"],"deny":["/w/.env"]},"limits":{"layer_bytes":"1000"}}`},
		{name: "layer over slash", policy: `{"filesystem":{"layer":["/"]}}`,
			wantField: "filesystem.layer[0]", wantMsg: "one workspace"},
		{name: "layer within layer", policy: `{"filesystem":{"layer":["/w","/w/sub"]}}`,
			wantField: "filesystem.layer[1]", wantMsg: "lies within filesystem.layer[0]"},
		{name: "layer that is a write root", policy: `{"filesystem":{"write":["/w"],"layer":["/w/"]}}`,
			wantField: "filesystem.layer[0]", wantMsg: "also a filesystem.write root"},
		{name: "layer within deny", policy: `{"filesystem":{"layer":["/w"],"deny":["/"]}}`,
			wantField: "filesystem.layer[0]", wantMsg: "filesystem.deny[0]"},
		{name: "relative layer", policy: `{"filesystem":{"layer":["w"]}}`,
			wantField: "filesystem.layer[0]", wantMsg: "not absolute"},
		{name: "layer with children", policy: `{"filesystem":{"layer":["/w"]},"children":{"allow":true}}`,
			wantField: "filesystem.layer", wantMsg: "children.allow"},

		{name: "relative write", policy: `{"filesystem":{"write":["/ok","rel/x"]}}`,
			wantField: "filesystem.write[1]", wantMsg: `"rel/x" is not absolute`},
		{name: "empty read root", policy: `{"filesystem":{"read":"LISTED","read_roots":[""]}}`,
			wantField: "filesystem.read_roots[0]", wantMsg: "empty"},
		{name: "nul in deny", policy: `{"filesystem":{"deny":["/a\u0000b"]}}`,
			wantField: "filesystem.deny[0]", wantMsg: "NUL"},
		{name: "relative read_only", policy: `{"filesystem":{"write":["/w"],"read_only":[".git"]}}`,
			wantField: "filesystem.read_only[0]", wantMsg: "not absolute"},
		{name: "read_only outside write", policy: `{"filesystem":{"write":["/w"],"read_only":["/w/.git","/x/.git"]}}`,
			wantField: "filesystem.read_only[1]", wantMsg: "not within any filesystem.write root"},
		{name: "read_only prefix is not within", policy: `{"filesystem":{"write":["/w"],"read_only":["/w-other"]}}`,
			wantField: "filesystem.read_only[0]", wantMsg: "not within"},
		{name: "write inside read_only", policy: `{"filesystem":{"write":["/w","/w/.git/hooks"],"read_only":["/w/.git"]}}`,
			wantField: "filesystem.write[1]", wantMsg: "filesystem.read_only[0]"},
		{name: "write equal to deny", policy: `{"filesystem":{"write":["/w/"],"deny":["/w"]}}`,
			wantField: "filesystem.write[0]", wantMsg: "filesystem.deny[0]"},
		{name: "read_roots with all", policy: `{"filesystem":{"read":"ALL","read_roots":["/usr"]}}`,
			wantField: "filesystem.read_roots", wantMsg: "not LISTED"},
		{name: "read_roots with unspecified read", policy: `{"filesystem":{"read_roots":["/usr"]}}`,
			wantField: "filesystem.read_roots", wantMsg: "unspecified (ALL)"},
		{name: "unknown read", policy: `{"filesystem":{"read":7}}`,
			wantField: "filesystem.read", wantMsg: "unknown value 7"},
		{name: "unknown mode", policy: `{"network":{"mode":9}}`,
			wantField: "network.mode", wantMsg: "unknown value 9"},
		{name: "allow with host mode", policy: `{"network":{"mode":"HOST","allow":[{"host":"a.com"}]}}`,
			wantField: "network.allow", wantMsg: "HOST, not ALLOWLIST"},
		{name: "allow with unspecified mode", policy: `{"network":{"allow":[{"host":"a.com"}]}}`,
			wantField: "network.allow", wantMsg: "unspecified (NONE)"},
		{name: "allow without host", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"},{"port":80}]}}`,
			wantField: "network.allow[1].host", wantMsg: "empty"},
		{name: "port too big", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com","port":65536}]}}`,
			wantField: "network.allow[0].port", wantMsg: "65536 is above 65535"},
		{name: "host with port", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com:443"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "port field"},
		{name: "host with space", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a .com"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "ASCII"},
		{name: "host non-ascii", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"bücher.de"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "xn--"},
		{name: "url as host", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"https//a.com/x"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "contains '/'"},
		{name: "bare star", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "wildcard"},
		{name: "inner star", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.*.com"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "wildcard"},
		{name: "star dot only", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*."}]}}`,
			wantField: "network.allow[0].host", wantMsg: "wildcard"},
		{name: "trailing dots", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"example.org."},{"host":"*.example.org."}]}}`},
		{name: "top-level wildcard", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.org"},{"host":"*.org","port":443}]}}`,
			wantField: "network.allow[1].host", wantMsg: `"*.org" admits every name under the top-level domain "org"; name a domain under it, as in *.example.org`},
		{name: "wildcard over an address", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.0.0.1"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "IP address"},
		{name: "empty label", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a..b"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "empty label"},
		{name: "zone", policy: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"fe80::1%eth0"}]}}`,
			wantField: "network.allow[0].host", wantMsg: "zone"},
		{name: "negative timeout", policy: `{"limits":{"timeout":"-5s"}}`,
			wantField: "limits.timeout", wantMsg: "negative"},
		{name: "negative sub-second timeout", policy: `{"limits":{"timeout":"-0.5s"}}`,
			wantField: "limits.timeout", wantMsg: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(pol(t, tt.policy))
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate: %v (%T), want *FieldError", err, err)
			}
			if fe.Field != tt.wantField || !strings.Contains(fe.Msg, tt.wantMsg) {
				t.Errorf("Validate: field %q msg %q, want field %q msg containing %q", fe.Field, fe.Msg, tt.wantField, tt.wantMsg)
			}
		})
	}
}

// Some invalid values cannot be written in protojson at all; a policy can
// still arrive that way over the wire or from Go code.
func TestValidateProgrammatic(t *testing.T) {
	tests := []struct {
		name      string
		policy    *sandboxdv1.Policy
		wantField string
	}{
		{"invalid utf8 path", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/a\xff"}}}, "filesystem.write[0]"},
		{"nanos out of range", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: &durationpb.Duration{Nanos: 2e9}}}, "limits.timeout"},
		{"mixed signs", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}}}, "limits.timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fe *FieldError
			if err := Validate(tt.policy); !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("Validate: %v, want *FieldError for %s", err, tt.wantField)
			}
		})
	}
}

func TestFieldErrorMessage(t *testing.T) {
	err := Validate(pol(t, `{"filesystem":{"write":["/a","rel/x"]}}`))
	if want := `filesystem.write[1]: "rel/x" is not absolute`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
