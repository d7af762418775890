package policy

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Decode parses a policy written as protojson and validates it. Unknown
// fields are an error rather than ignored: a misspelt "deny" that was
// silently dropped would run the sandbox wider than its author meant.
// The result is not normalized, so Narrow can still tell what was omitted.
func Decode(data []byte) (*sandboxdv1.Policy, error) {
	p := &sandboxdv1.Policy{}
	if err := protojson.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("decode policy: %w", err)
	}
	if err := Validate(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Encode renders p as multiline protojson with the field names of the
// .proto file, the same names FieldError and WidenError use. It is meant for
// people; its exact whitespace is not stable, so never hash it (use Digest).
func Encode(p *sandboxdv1.Policy) ([]byte, error) {
	if p == nil {
		p = &sandboxdv1.Policy{}
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true}.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode policy: %w", err)
	}
	return b, nil
}
