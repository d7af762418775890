package policy

import (
	"regexp"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestDigestSameMeaning(t *testing.T) {
	groups := [][]string{
		{"", `{}`, `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{"timeout":"0s"},"children":{"allow":false}}`,
			`{"filesystem":{},"network":{},"limits":{},"children":{}}`, `{"network":{"mode":"NONE","allow":[]},"filesystem":{"write":[]}}`},
		{`{"filesystem":{"write":["/b","/a"],"deny":["/a/x","/b/y"]}}`,
			`{"filesystem":{"write":["/a/","/b","/a/sub","/b/./"],"deny":["/b/y","/a/x","/a/x/z"]}}`},
		{`{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com","port":443},{"host":"::1"}]}}`,
			`{"network":{"mode":"ALLOWLIST","allow":[{"host":"0::1"},{"host":"A.com","port":443},{"host":"a.com","port":443}]}}`},
		{`{"limits":{"timeout":"1.5s"}}`, `{"limits":{"timeout":"1.500s"}}`},
		{`{"network":{"mode":"ALLOWLIST","allow":[{"host":"example.org","port":443},{"host":"*.example.net"}]}}`,
			`{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.Example.net."},{"host":"EXAMPLE.org.","port":443}]}}`},
	}
	for i, g := range groups {
		want := Digest(pol(t, g[0]))
		for _, s := range g[1:] {
			if got := Digest(pol(t, s)); got != want {
				t.Errorf("group %d: Digest(%s) = %s, want %s like %s", i, s, got, want, g[0])
			}
		}
	}
}

func TestDigestDifferentMeaning(t *testing.T) {
	policies := []string{
		`{}`,
		`{"filesystem":{"read":"LISTED"}}`,
		`{"filesystem":{"read":"LISTED","read_roots":["/usr"]}}`,
		`{"filesystem":{"write":["/w"]}}`,
		`{"filesystem":{"write":["/w"],"read_only":["/w/.git"]}}`,
		`{"filesystem":{"deny":["/w"]}}`,
		`{"filesystem":{"deny":["/w\n"]}}`,
		`{"filesystem":{"deny":["/w","/x"]}}`,
		`{"network":{"mode":"HOST"}}`,
		`{"network":{"mode":"ALLOWLIST"}}`,
		`{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]}}`,
		`{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com","port":1}]}}`,
		`{"limits":{"timeout":"1s"}}`,
		`{"limits":{"timeout":"1.000000001s"}}`,
		`{"limits":{"memory_bytes":"1"}}`,
		`{"limits":{"pids":1}}`,
		`{"limits":{"cpu_millis":1}}`,
		`{"limits":{"output_bytes":"1"}}`,
		`{"children":{"allow":true}}`,
		`{"filesystem":{"layer":["/w"]}}`,
		`{"filesystem":{"layer":["/w"],"read_only":["/w/.git"]}}`,
		`{"limits":{"layer_bytes":"1"}}`,
	}
	seen := map[string]string{}
	for _, s := range policies {
		d := Digest(pol(t, s))
		if other, ok := seen[d]; ok {
			t.Errorf("Digest(%s) == Digest(%s) = %s", s, other, d)
		}
		seen[d] = s
	}
}

// The digest of a given policy must never change across releases: it is
// recorded in audit logs and exported to sandboxes. If one of these changes,
// existing digests broke.
func TestDigestGolden(t *testing.T) {
	tests := []struct {
		policy string
		text   string
		digest string
	}{
		{`{}`, "sandboxd policy v1\n", "sha256:b7f0bb9315577a3ee3c74391586753a70b64576ad31b06d5323f9bc39d8ac6b6"},
		{`{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/w/s"]},
			"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com","port":443},{"host":"b.com"}]},
			"limits":{"timeout":"90.25s","memory_bytes":"1","pids":2,"cpu_millis":3,"output_bytes":"4"},"children":{"allow":true}}`,
			`sandboxd policy v1
children.allow=true
filesystem.deny="/w/s"
filesystem.read=LISTED
filesystem.read_only="/w/.git"
filesystem.read_roots="/usr"
filesystem.write="/w"
limits.cpu_millis=3
limits.memory_bytes=1
limits.output_bytes=4
limits.pids=2
limits.timeout=90.25s
network.allow={host="a.com" port=443}
network.allow={host="b.com"}
network.mode=ALLOWLIST
`, "sha256:4eb61fa5dd9f85af5490c0ed1dc22a7a6b2193f0444902ff423e6d413584ada9"},
	}
	for _, tt := range tests {
		p := pol(t, tt.policy)
		if got := canonicalText(Normalize(p)); got != tt.text {
			t.Errorf("canonical text of %s:\n%s\nwant\n%s", tt.policy, got, tt.text)
		}
		if got := Digest(p); got != tt.digest {
			t.Errorf("Digest(%s) = %s, want %s", tt.policy, got, tt.digest)
		}
	}
}

func TestDigestFormat(t *testing.T) {
	if d := Digest(nil); !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(d) {
		t.Errorf("Digest(nil) = %q", d)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    *durationpb.Duration
		want string
	}{
		{&durationpb.Duration{Seconds: 90}, "90s"},
		{&durationpb.Duration{Seconds: 1, Nanos: 5e8}, "1.5s"},
		{&durationpb.Duration{Nanos: 1}, "0.000000001s"},
		// Beyond what time.Duration can hold; must not saturate.
		{&durationpb.Duration{Seconds: 315576000000}, "315576000000s"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.d.GetSeconds(), tt.d.GetNanos()); got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	long := &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: &durationpb.Duration{Seconds: 315576000000}}}
	longer := &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: &durationpb.Duration{Seconds: 315576000000, Nanos: 1}}}
	if Digest(long) == Digest(longer) {
		t.Error("durations beyond time.Duration digest the same")
	}
}
