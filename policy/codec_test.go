package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantErr   string // substring; "" means success
		wantField string // set when the error must be a *FieldError
	}{
		{name: "empty object", in: `{}`},
		{name: "proto names", in: `{"filesystem":{"read_only":["/w/.git"],"write":["/w"]}}`},
		{name: "json names", in: `{"filesystem":{"readOnly":["/w/.git"],"write":["/w"]}}`},
		{name: "unknown top-level field", in: `{"filesystem":{},"netwrok":{}}`, wantErr: `unknown field "netwrok"`},
		{name: "unknown nested field", in: `{"filesystem":{"denny":["/x"]}}`, wantErr: `unknown field "denny"`},
		{name: "unknown enum name", in: `{"network":{"mode":"OPEN"}}`, wantErr: `OPEN`},
		{name: "wrong type", in: `{"filesystem":{"write":"/w"}}`, wantErr: `(line 1:24): unexpected token "/w"`},
		{name: "bad duration", in: `{"limits":{"timeout":"soon"}}`, wantErr: `invalid google.protobuf.Duration value "soon"`},
		{name: "not json", in: `write /w`, wantErr: `decode policy`},
		{name: "duplicate field", in: `{"network":{"mode":"HOST"},"network":{"mode":"NONE"}}`, wantErr: `duplicate field "network"`},
		{name: "empty input", in: ``, wantErr: `decode policy`},
		{name: "validation applies", in: `{"filesystem":{"write":["w"]}}`, wantErr: "not absolute", wantField: "filesystem.write[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("Decode: %v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode: error %v, want one containing %q", err, tt.wantErr)
			}
			var fe *FieldError
			if isField := errors.As(err, &fe); isField != (tt.wantField != "") || (isField && fe.Field != tt.wantField) {
				t.Errorf("Decode: error %v (%T), want FieldError for %q", err, err, tt.wantField)
			}
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	in := pol(t, `{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/w/secret"]},
		"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com","port":443}]},
		"limits":{"timeout":"2.5s","memory_bytes":"100","pids":3,"cpu_millis":500,"output_bytes":"9"},"children":{"allow":true}}`)
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "\n") || !strings.Contains(s, `"read_only"`) || strings.Contains(s, "readOnly") {
		t.Errorf("Encode is not multiline with proto field names:\n%s", s)
	}
	out, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(Encode(p)): %v\n%s", err, s)
	}
	assertEqual(t, out, in)
}

func TestEncodeNil(t *testing.T) {
	b, err := Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Decode(b); err != nil || Digest(p) != Digest(nil) {
		t.Errorf("Encode(nil) = %q does not decode to the default policy: %v", b, err)
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	p := pol(t, `{}`)
	p.Filesystem = Default().Filesystem
	p.Filesystem.Write = []string{"/\xff"}
	if _, err := Encode(p); err == nil || !strings.HasPrefix(err.Error(), "encode policy: ") {
		t.Errorf("Encode with invalid UTF-8: %v, want an error", err)
	}
}
