package policy

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// pol parses protojson without validating, so tests can build invalid
// policies as easily as valid ones. "" is a nil policy.
func pol(t testing.TB, s string) *sandboxdv1.Policy {
	t.Helper()
	if s == "" {
		return nil
	}
	p := &sandboxdv1.Policy{}
	if err := protojson.Unmarshal([]byte(s), p); err != nil {
		t.Fatalf("test policy %s: %v", s, err)
	}
	return p
}

// text renders p compactly for failure messages.
func text(p *sandboxdv1.Policy) string {
	return protojson.MarshalOptions{UseProtoNames: true}.Format(p)
}

func assertEqual(t testing.TB, got, want *sandboxdv1.Policy) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("got  %s\nwant %s", text(got), text(want))
	}
}
