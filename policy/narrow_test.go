package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestNarrow(t *testing.T) {
	const (
		workspace = `{"filesystem":{"write":["/w","/tmp"],"read_only":["/w/.git"],"deny":["/w/secret","/home/u/.ssh"]},
			"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
			"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`
		listed  = `{"filesystem":{"read":"LISTED","read_roots":["/usr","/etc"],"write":["/w"]},"children":{"allow":true}}`
		open    = `{"filesystem":{"write":["/"]},"network":{"mode":"HOST"},"children":{"allow":true}}`
		noChild = `{"filesystem":{"write":["/w"]},"network":{"mode":"HOST"}}`
	)
	tests := []struct {
		name      string
		parent    string
		child     string
		want      string // normalized result, when no error
		wantField string // set when a *WidenError (or *FieldError) is expected
		wantMsg   string
	}{
		{name: "nil child is the parent", parent: workspace, child: "", want: workspace},
		{name: "empty child is the parent", parent: workspace, child: `{}`, want: workspace},
		{name: "empty network and limits inherit", parent: workspace, child: `{"network":{},"limits":{}}`, want: workspace},
		{name: "nil parent is the default", parent: "", child: `{"filesystem":{"deny":["/x"]}}`,
			want: `{"filesystem":{"deny":["/x"]}}`},

		{name: "a child cannot have layers", parent: noChild, child: `{"filesystem":{"layer":["/w/repo"]}}`,
			wantField: "filesystem.layer", wantMsg: "cannot have layers"},

		// filesystem.write
		{name: "narrower write keeps parent carve-outs", parent: workspace,
			child: `{"filesystem":{"write":["/w"]}}`,
			want: `{"filesystem":{"write":["/w"],"read_only":["/w/.git"],"deny":["/home/u/.ssh","/w/secret"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "subdirectory write drops carve-outs outside it", parent: workspace,
			child: `{"filesystem":{"write":["/w/src/"],"read_only":["/w/src/vendor"],"deny":["/w/src/.env"]}}`,
			want: `{"filesystem":{"write":["/w/src"],"read_only":["/w/src/vendor"],"deny":["/home/u/.ssh","/w/secret","/w/src/.env"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "deny alone keeps the parent's write roots", parent: workspace, child: `{"filesystem":{"deny":["/x"]}}`,
			want: `{"filesystem":{"write":["/tmp","/w"],"read_only":["/w/.git"],"deny":["/home/u/.ssh","/w/secret","/x"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "read_only alone is checked against the parent's write roots", parent: workspace, child: `{"filesystem":{"read_only":["/w/src/.git"]}}`,
			want: `{"filesystem":{"write":["/tmp","/w"],"read_only":["/w/.git","/w/src/.git"],"deny":["/home/u/.ssh","/w/secret"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "read_only alone outside the parent's write roots", parent: workspace, child: `{"filesystem":{"read_only":["/etc"]}}`,
			wantField: "filesystem.read_only[0]", wantMsg: "not within any filesystem.write root"},
		{name: "write outside parent", parent: workspace, child: `{"filesystem":{"write":["/w","/etc"]}}`,
			wantField: "filesystem.write[1]", wantMsg: `"/etc" is not within any write root of the parent`},
		{name: "write is a sibling with a common prefix", parent: workspace, child: `{"filesystem":{"write":["/w2"]}}`,
			wantField: "filesystem.write[0]", wantMsg: "not within"},
		{name: "write escapes with dotdot", parent: workspace, child: `{"filesystem":{"write":["/w/../etc"]}}`,
			wantField: "filesystem.write[0]", wantMsg: `"/w/../etc"`},
		{name: "write a parent read_only", parent: workspace, child: `{"filesystem":{"write":["/w/.git"]}}`,
			wantField: "filesystem.write[0]", wantMsg: `read-only "/w/.git"`},
		{name: "write inside a parent read_only", parent: workspace, child: `{"filesystem":{"write":["/w/.git/hooks"]}}`,
			wantField: "filesystem.write[0]", wantMsg: `read-only "/w/.git"`},
		{name: "write a parent deny", parent: workspace, child: `{"filesystem":{"write":["/w/secret/x"]}}`,
			wantField: "filesystem.write[0]", wantMsg: `denied "/w/secret"`},

		// filesystem.read
		{name: "listed under all", parent: workspace, child: `{"filesystem":{"read":"LISTED","read_roots":["/opt"]}}`,
			want: `{"filesystem":{"read":"LISTED","read_roots":["/opt"],"write":["/tmp","/w"],"read_only":["/w/.git"],"deny":["/home/u/.ssh","/w/secret"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "all under listed", parent: listed, child: `{"filesystem":{"read":"ALL"}}`,
			wantField: "filesystem.read", wantMsg: "ALL, but the parent reads only LISTED roots"},
		{name: "empty filesystem inherits listed read and the write roots", parent: listed, child: `{"filesystem":{}}`,
			want: listed},
		{name: "listed roots within parent read or write roots", parent: listed,
			child: `{"filesystem":{"read":"LISTED","read_roots":["/usr/lib","/w/docs"],"write":["/w/out"]}}`,
			want:  `{"filesystem":{"read":"LISTED","read_roots":["/usr/lib","/w/docs"],"write":["/w/out"]},"children":{"allow":true}}`},
		{name: "listed root outside parent", parent: listed, child: `{"filesystem":{"read":"LISTED","read_roots":["/usr","/home"]}}`,
			wantField: "filesystem.read_roots[1]", wantMsg: `"/home" is not within any read root or write root of the parent`},

		// network
		{name: "none under allowlist", parent: workspace, child: `{"network":{"mode":"NONE"}}`,
			want: `{"filesystem":{"write":["/tmp","/w"],"read_only":["/w/.git"],"deny":["/home/u/.ssh","/w/secret"]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "host under allowlist", parent: workspace, child: `{"network":{"mode":"HOST"}}`,
			wantField: "network.mode", wantMsg: "HOST, but the parent allows only ALLOWLIST"},
		{name: "allowlist under none", parent: listed, child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]}}`,
			wantField: "network.mode", wantMsg: "ALLOWLIST, but the parent allows only NONE"},
		{name: "host under host", parent: open, child: `{"network":{"mode":"HOST"}}`, want: open},
		{name: "any allowlist under host", parent: open, child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]}}`,
			want: `{"filesystem":{"write":["/"]},"network":{"mode":"ALLOWLIST","allow":[{"host":"a.com"}]},"children":{"allow":true}}`},
		{name: "allowlist subset", parent: workspace,
			child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"API.example.com","port":443},{"host":"*.cdn.example.com","port":443},{"host":"pypi.org","port":443}]}}`,
			want: `{"filesystem":{"write":["/tmp","/w"],"read_only":["/w/.git"],"deny":["/home/u/.ssh","/w/secret"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.cdn.example.com","port":443},{"host":"api.example.com","port":443},{"host":"pypi.org","port":443}]},
				"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`},
		{name: "allowlist without entries inherits the parent's", parent: workspace, child: `{"network":{"mode":"ALLOWLIST"}}`, want: workspace},
		{name: "allowlist other port", parent: workspace, child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"api.example.com","port":80}]}}`,
			wantField: "network.allow[0]", wantMsg: `"api.example.com" port 80 is not admitted`},
		{name: "allowlist any port under fixed port", parent: workspace, child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"api.example.com"}]}}`,
			wantField: "network.allow[0]", wantMsg: "port 0"},
		{name: "allowlist wildcard base name", parent: workspace, child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"pypi.org"},{"host":"example.com","port":443}]}}`,
			wantField: "network.allow[1]", wantMsg: "not admitted"},
		{name: "allowlist wider wildcard", parent: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.cdn.example.com"}]}}`,
			child:     `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443}]}}`,
			wantField: "network.allow[0]", wantMsg: "not admitted"},
		{name: "allowlist top-level wildcard is invalid", parent: workspace, child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.com","port":443}]}}`,
			wantField: "network.allow[0].host", wantMsg: "top-level domain"},
		{name: "allowlist trailing dots", parent: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.Example.com."},{"host":"pypi.org.","port":443}]}}`,
			child: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"api.example.com.","port":443},{"host":"PyPI.org","port":443}]}}`,
			want:  `{"network":{"mode":"ALLOWLIST","allow":[{"host":"api.example.com","port":443},{"host":"pypi.org","port":443}]}}`},
		{name: "allowlist IP with trailing dot is no IP", parent: `{"network":{"mode":"ALLOWLIST","allow":[{"host":"10.0.0.1"}]}}`,
			child:     `{"network":{"mode":"ALLOWLIST","allow":[{"host":"10.0.0.1."}]}}`,
			wantField: "network.allow[0].host", wantMsg: "write 10.0.0.1"},

		// limits
		{name: "lower limits", parent: workspace, child: `{"limits":{"timeout":"30s","pids":10,"cpu_millis":500}}`,
			want: `{"filesystem":{"write":["/tmp","/w"],"read_only":["/w/.git"],"deny":["/home/u/.ssh","/w/secret"]},
				"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
				"limits":{"timeout":"30s","memory_bytes":"1000","pids":10,"cpu_millis":500},"children":{"allow":true}}`},
		{name: "equal limits", parent: workspace, child: `{"limits":{"timeout":"60s","memory_bytes":"1000","pids":100}}`, want: workspace},
		{name: "zero timeout inherits", parent: workspace, child: `{"limits":{"timeout":"0s"}}`, want: workspace},
		{name: "longer timeout", parent: workspace, child: `{"limits":{"timeout":"60.000000001s"}}`,
			wantField: "limits.timeout", wantMsg: "above the parent's 1m0s"},
		{name: "more memory", parent: workspace, child: `{"limits":{"memory_bytes":"1001"}}`,
			wantField: "limits.memory_bytes", wantMsg: "1001 is above the parent's 1000"},
		{name: "more pids", parent: workspace, child: `{"limits":{"pids":101}}`,
			wantField: "limits.pids", wantMsg: "101 is above the parent's 100"},
		{name: "any limit under unlimited", parent: open, child: `{"limits":{"timeout":"3600s","cpu_millis":4000,"output_bytes":"5"}}`,
			want: `{"filesystem":{"write":["/"]},"network":{"mode":"HOST"},"limits":{"timeout":"3600s","cpu_millis":4000,"output_bytes":"5"},"children":{"allow":true}}`},
		{name: "cpu under limited cpu", parent: `{"limits":{"cpu_millis":100,"output_bytes":"10"}}`, child: `{"limits":{"cpu_millis":200}}`,
			wantField: "limits.cpu_millis", wantMsg: "200"},
		{name: "output under limited output", parent: `{"limits":{"cpu_millis":100,"output_bytes":"10"}}`, child: `{"limits":{"output_bytes":"11"}}`,
			wantField: "limits.output_bytes", wantMsg: "11"},

		// children
		{name: "children allowed under disallowed", parent: noChild, child: `{"children":{"allow":true}}`,
			wantField: "children.allow", wantMsg: "may not start child sandboxes"},
		{name: "children disallowed under allowed", parent: open, child: `{"children":{}}`,
			want: `{"filesystem":{"write":["/"]},"network":{"mode":"HOST"}}`},
		{name: "children inherit", parent: open, child: `{"network":{"mode":"NONE"}}`,
			want: `{"filesystem":{"write":["/"]},"children":{"allow":true}}`},

		// first widening field wins
		{name: "first field reported", parent: noChild, child: `{"filesystem":{"write":["/etc"]},"network":{"mode":"HOST"},"children":{"allow":true}}`,
			wantField: "filesystem.write[0]"},
		{name: "invalid child", parent: workspace, child: `{"filesystem":{"write":["w"]}}`,
			wantField: "filesystem.write[0]", wantMsg: "not absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, child := pol(t, tt.parent), pol(t, tt.child)
			got, err := Narrow(parent, child)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Narrow: %v", err)
				}
				assertEqual(t, got, Normalize(pol(t, tt.want)))
				// The result is never wider than the parent.
				again, err := Narrow(parent, got)
				if err != nil {
					t.Fatalf("Narrow(parent, result): %v", err)
				}
				assertEqual(t, again, got)
				return
			}
			var field, msg string
			var we *WidenError
			var fe *FieldError
			switch {
			case errors.As(err, &we):
				field, msg = we.Field, we.Msg
			case errors.As(err, &fe):
				field, msg = fe.Field, fe.Msg
			default:
				t.Fatalf("Narrow: %v, %v; want an error for %s", text(got), err, tt.wantField)
			}
			if field != tt.wantField || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("Narrow: field %q msg %q, want field %q msg containing %q", field, msg, tt.wantField, tt.wantMsg)
			}
		})
	}
}

func TestNarrowInvalidParent(t *testing.T) {
	_, err := Narrow(pol(t, `{"filesystem":{"write":["rel"]}}`), nil)
	var fe *FieldError
	if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "parent policy: ") {
		t.Errorf("Narrow with invalid parent: %v, want wrapped *FieldError", err)
	}
}

func TestWidenErrorMessage(t *testing.T) {
	_, err := Narrow(pol(t, `{}`), pol(t, `{"network":{"mode":"HOST"}}`))
	if want := "network.mode: HOST, but the parent allows only NONE"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
