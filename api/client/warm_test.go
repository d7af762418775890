package client

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// TestPrepareReachesNestedTypes: what a session's responses carry is
// readied down to its deepest messages, through oneofs, lists and message
// fields, and each type once.
func TestPrepareReachesNestedTypes(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	prepare((&sandboxdv1.SessionResponse{}).ProtoReflect(), seen)
	for _, m := range []protoreflect.ProtoMessage{
		&sandboxdv1.SessionResponse{}, &sandboxdv1.Started{}, &sandboxdv1.EnforcementReport{},
		&sandboxdv1.FieldEnforcement{}, &sandboxdv1.DenialSource{}, &sandboxdv1.Output{}, &sandboxdv1.Exit{},
	} {
		if name := m.ProtoReflect().Descriptor().FullName(); !seen[name] {
			t.Errorf("%s not prepared", name)
		}
	}
	// Start is a request: nothing of it is in a response.
	if name := (&sandboxdv1.Start{}).ProtoReflect().Descriptor().FullName(); seen[name] {
		t.Errorf("%s prepared for responses", name)
	}
}
