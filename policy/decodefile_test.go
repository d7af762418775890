package policy

import (
	"runtime"
	"strings"
	"testing"
)

func TestDecodeFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cases name Unix paths")
	}
	tests := []struct {
		name, in, want, wantErr string
	}{
		{name: "flag spellings", in: `{"network":{"mode":"none"},"filesystem":{"read":"all"}}`,
			want: `{"network":{"mode":"NONE"},"filesystem":{"read":"ALL"}}`},
		{name: "mixed case", in: `{"network":{"mode":"AllowList","allow":[{"host":"example.org"}]}}`,
			want: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"example.org"}]}}`},
		{name: "canonical spellings", in: `{"network":{"mode":"HOST"},"filesystem":{"read":"LISTED","read_roots":["/usr"]}}`,
			want: `{"network":{"mode":"HOST"},"filesystem":{"read":"LISTED","read_roots":["/usr"]}}`},
		{name: "number", in: `{"network":{"mode":2}}`, want: `{"network":{"mode":"HOST"}}`},
		{name: "resolved before validation", in: `{"filesystem":{"write":[".","/abs/../w"],"deny":["~"]}}`,
			wantErr: `filesystem.write[0]: "/home/u/proj" lies within filesystem.deny[0] "/home/u"`},
		{name: "home and relative", in: `{"filesystem":{"write":[".","~/.cache/x","/abs/../w"],"readOnly":[".git"],"deny":["~/.ssh","../secret"]}}`,
			want: `{"filesystem":{"write":["/home/u/proj","/home/u/.cache/x","/w"],"read_only":["/home/u/proj/.git"],"deny":["/home/u/.ssh","/home/u/secret"]}}`},
		{name: "layer", in: `{"filesystem":{"layer":[".","~/w"]}}`,
			want: `{"filesystem":{"layer":["/home/u/proj","/home/u/w"]}}`},
		{name: "big limit", in: `{"limits":{"memory_bytes":18446744073709551615}}`,
			want: `{"limits":{"memory_bytes":"18446744073709551615"}}`},
		{name: "other user", in: `{"filesystem":{"deny":["~root/x"]}}`, wantErr: `filesystem.deny[0]: "~root/x" names another user's home directory`},
		{name: "unknown enum", in: `{"network":{"mode":"open"}}`, wantErr: `decode policy`},
		{name: "unknown field", in: `{"filesystem":{"dney":["/x"]}}`, wantErr: `unknown field "dney"`},
		{name: "empty path", in: `{"filesystem":{"write":[""]}}`, wantErr: `filesystem.write[0]: path is empty`},
		{name: "trailing", in: `{} {}`, wantErr: `data after the JSON object`},
		{name: "not an object", in: `[]`, wantErr: `decode policy`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeFile([]byte(tt.in), "/home/u", "/home/u/proj")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DecodeFile: %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertEqual(t, got, pol(t, tt.want))
		})
	}
	if _, err := DecodeFile([]byte(`{"filesystem":{"write":["x"]}}`), "", ""); err == nil || !strings.Contains(err.Error(), "filesystem.write[0]") {
		t.Errorf("relative path without a current directory: %v", err)
	}
}
