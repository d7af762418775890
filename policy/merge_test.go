package policy

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestMerge(t *testing.T) {
	const file = `{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/s"]},
		"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},
		"limits":{"timeout":"60s","memory_bytes":"100","pids":10,"cpu_millis":1000,"output_bytes":"5"},"children":{"allow":true}}`
	tests := []struct {
		name        string
		base, extra string
		want        string
	}{
		{name: "both nil", want: `{}`},
		{name: "nil extra", base: file, want: file},
		{name: "nil base", extra: file, want: file},
		{name: "empty extra", base: file, extra: `{}`, want: file},
		{name: "empty submessages change nothing", base: file, extra: `{"filesystem":{},"network":{},"limits":{"timeout":"0s"}}`, want: file},
		{name: "lists append", base: file,
			extra: `{"filesystem":{"read_roots":["/opt"],"write":["/tmp","/w"],"read_only":["/tmp/x"],"deny":["/t"]},"network":{"allow":[{"host":"b.com","port":1}]}}`,
			want: `{"filesystem":{"read":"LISTED","read_roots":["/usr","/opt"],"write":["/w","/tmp","/w"],"read_only":["/w/.git","/tmp/x"],"deny":["/s","/t"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"},{"host":"b.com","port":1}]},
				"limits":{"timeout":"60s","memory_bytes":"100","pids":10,"cpu_millis":1000,"output_bytes":"5"},"children":{"allow":true}}`},
		{name: "enums and limits override", base: file,
			extra: `{"filesystem":{"read":"ALL"},"network":{"mode":"HOST"},"limits":{"timeout":"5s","pids":3},"children":{}}`,
			want: `{"filesystem":{"read":"ALL","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/s"]},
				"network":{"mode":"HOST"},
				"limits":{"timeout":"5s","memory_bytes":"100","pids":3,"cpu_millis":1000,"output_bytes":"5"},"children":{}}`},
		{name: "other limits override", base: file, extra: `{"limits":{"memory_bytes":"7","cpu_millis":8,"output_bytes":"9"}}`,
			want: `{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/s"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},
				"limits":{"timeout":"60s","memory_bytes":"7","pids":10,"cpu_millis":8,"output_bytes":"9"},"children":{"allow":true}}`},
		{name: "another mode drops the allow list", base: file, extra: `{"network":{"mode":"NONE"}}`,
			want: `{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/s"]},
				"network":{"mode":"NONE"},
				"limits":{"timeout":"60s","memory_bytes":"100","pids":10,"cpu_millis":1000,"output_bytes":"5"},"children":{"allow":true}}`},
		{name: "allowlist onto allowlist appends", base: file, extra: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"b.com","port":443}]}}`,
			want: `{"filesystem":{"read":"LISTED","read_roots":["/usr"],"write":["/w"],"read_only":["/w/.git"],"deny":["/s"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"},{"host":"b.com","port":443}]},
				"limits":{"timeout":"60s","memory_bytes":"100","pids":10,"cpu_millis":1000,"output_bytes":"5"},"children":{"allow":true}}`},
		{name: "allowlist onto host", base: `{"network":{"mode":"HOST"}}`, extra: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"b.com"}]}}`,
			want: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"b.com"}]}}`},
		{name: "flags onto empty file", base: `{}`, extra: `{"filesystem":{"write":["/w"]},"network":{"mode":"HOST"},"limits":{"timeout":"1s"}}`,
			want: `{"filesystem":{"write":["/w"]},"network":{"mode":"HOST"},"limits":{"timeout":"1s"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, extra := pol(t, tt.base), pol(t, tt.extra)
			baseBefore, extraBefore := proto.Clone(base), proto.Clone(extra)
			got := Merge(base, extra)
			assertEqual(t, got, pol(t, tt.want))
			if !proto.Equal(base, baseBefore) || !proto.Equal(extra, extraBefore) {
				t.Error("Merge modified an argument")
			}
		})
	}
}

func TestMergeDoesNotAlias(t *testing.T) {
	extra := pol(t, `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},"limits":{"timeout":"5s"}}`)
	got := Merge(nil, extra)
	got.Network.Allow[0].Host = "changed"
	got.Limits.Timeout.Seconds = 1
	assertEqual(t, extra, pol(t, `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},"limits":{"timeout":"5s"}}`))
}
