package policy

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "nil", in: "", want: `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "empty", in: `{}`, want: `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "explicit defaults", in: `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{"timeout":"0s"},"children":{"allow":false}}`,
			want: `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "paths cleaned sorted deduped",
			in:   `{"filesystem":{"write":["/z/","/a/./b","/a/b","/a-b"],"deny":["/s//x","/s/x","/r"]}}`,
			want: `{"filesystem":{"read":"ALL","write":["/a-b","/a/b","/z"],"deny":["/r","/s/x"]},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "nested write roots removed",
			in:   `{"filesystem":{"write":["/w/sub","/w","/w-x","/w/sub/deeper"]}}`,
			want: `{"filesystem":{"read":"ALL","write":["/w","/w-x"]},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "everything nested under root",
			in:   `{"filesystem":{"write":["/a","/","/b/c"]}}`,
			want: `{"filesystem":{"read":"ALL","write":["/"]},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "nested read_only and deny removed",
			in:   `{"filesystem":{"write":["/w"],"read_only":["/w/.git/hooks","/w/.git"],"deny":["/h/.ssh/id","/h/.ssh"]}}`,
			want: `{"filesystem":{"read":"ALL","write":["/w"],"read_only":["/w/.git"],"deny":["/h/.ssh"]},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "read_only outside write dropped",
			in:   `{"filesystem":{"write":["/w"],"read_only":["/x/.git","/w/.git"]}}`,
			want: `{"filesystem":{"read":"ALL","write":["/w"],"read_only":["/w/.git"]},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "listed read roots inside write dropped",
			in:   `{"filesystem":{"read":"LISTED","read_roots":["/w/docs","/usr","/usr/lib"],"write":["/w"]}}`,
			want: `{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"]},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "read roots dropped under all",
			in:   `{"filesystem":{"read_roots":["/usr"]}}`,
			want: `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{},"children":{}}`},
		{name: "allow canonical",
			in: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"B.example.com","port":443},{"host":"a.example.com"},
				{"host":"a.example.com","port":80},{"host":"b.example.com","port":443},{"host":"0:0::1"},{"host":"*.x.org","port":443},{"host":"y.x.org","port":443},{"host":"z.x.org","port":80}]}}`,
			want: `{"filesystem":{"read":"ALL"},"network":{"mode":"ALLOWLIST","allow":[{"host":"*.x.org","port":443},{"host":"::1"},{"host":"a.example.com"},{"host":"b.example.com","port":443},{"host":"z.x.org","port":80}]},"limits":{},"children":{}}`},
		{name: "allow trailing dots",
			in:   `{"network":{"mode":"ALLOWLIST","allow":[{"host":"A.example.org.","port":443},{"host":"a.example.org","port":443},{"host":"*.x.org."},{"host":"y.x.org"}]}}`,
			want: `{"filesystem":{"read":"ALL"},"network":{"mode":"ALLOWLIST","allow":[{"host":"*.x.org"},{"host":"a.example.org","port":443}]},"limits":{},"children":{}}`},
		{name: "allow dropped outside allowlist",
			in:   `{"network":{"mode":"HOST","allow":[{"host":"a.com"}]}}`,
			want: `{"filesystem":{"read":"ALL"},"network":{"mode":"HOST"},"limits":{},"children":{}}`},
		{name: "limits kept",
			in:   `{"limits":{"timeout":"1.5s","memory_bytes":"7","pids":8,"cpu_millis":9,"output_bytes":"10"},"children":{"allow":true}}`,
			want: `{"filesystem":{"read":"ALL"},"network":{"mode":"NONE"},"limits":{"timeout":"1.5s","memory_bytes":"7","pids":8,"cpu_millis":9,"output_bytes":"10"},"children":{"allow":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := pol(t, tt.in)
			before := proto.Clone(in)
			got := Normalize(in)
			assertEqual(t, got, pol(t, tt.want))
			if !proto.Equal(in, before) {
				t.Errorf("Normalize modified its argument: %s", text(in))
			}
			assertEqual(t, Normalize(got), got)
			if err := Validate(got); err != nil && Validate(in) == nil {
				t.Errorf("normalized policy is invalid: %v", err)
			}
		})
	}
}

func TestNormalizeDoesNotAlias(t *testing.T) {
	in := pol(t, `{"filesystem":{"write":["/w"]},"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},"limits":{"timeout":"5s"}}`)
	got := Normalize(in)
	got.Filesystem.Write[0] = "/changed"
	got.Network.Allow[0].Host = "changed"
	got.Limits.Timeout.Seconds = 99
	assertEqual(t, in, pol(t, `{"filesystem":{"write":["/w"]},"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},"limits":{"timeout":"5s"}}`))
}

func TestDefault(t *testing.T) {
	assertEqual(t, Default(), Normalize(nil))
	if err := Validate(Default()); err != nil {
		t.Fatal(err)
	}
	d := Default()
	if d.Filesystem.Read.String() != "ALL" || len(d.Filesystem.Write) != 0 || d.Network.Mode.String() != "NONE" || d.Children.Allow || d.Limits.Timeout != nil {
		t.Errorf("Default is not read-all/write-nothing/no-network/no-children: %s", text(d))
	}
}
