package main

import (
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestPrintRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    *sandboxdv1.Unenforceable
		want string
	}{
		{
			name: "every fact",
			u: &sandboxdv1.Unenforceable{
				Field:     "network.mode",
				Mechanism: "network namespace",
				Found:     "user namespaces disabled",
				Probe:     "unshare(CLONE_NEWUSER|CLONE_NEWNET)",
				Errno:     "EPERM (operation not permitted)",
				Remedy:    "sysctl -w kernel.unprivileged_userns_clone=1",
			},
			want: `sandboxctl: refused: cannot enforce network.mode
  needs: network namespace
  found: user namespaces disabled
  probe: unshare(CLONE_NEWUSER|CLONE_NEWNET): EPERM (operation not permitted)
  remedy: sysctl -w kernel.unprivileged_userns_clone=1
`,
		},
		{
			name: "missing facts are left out",
			u:    &sandboxdv1.Unenforceable{Field: "filesystem.write", Mechanism: "landlock", Probe: "landlock_create_ruleset"},
			want: `sandboxctl: refused: cannot enforce filesystem.write
  needs: landlock
  probe: landlock_create_ruleset
`,
		},
		{
			name: "errno without a probe",
			u:    &sandboxdv1.Unenforceable{Field: "limits.pids", Errno: "EACCES (permission denied)"},
			want: `sandboxctl: refused: cannot enforce limits.pids
  errno: EACCES (permission denied)
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			printRefusal(&out, tc.u)
			if out.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}
