package launcherwindows

import (
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestUnenforceableFieldsAreRefused(t *testing.T) {
	for _, c := range []struct {
		field  string
		policy *sandboxdv1.Policy
	}{
		{"filesystem.read", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_LISTED, ReadRoots: []string{`C:\tools`}}}},
		{"network.allow", &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}}}}},
		{"filesystem.write[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\`}}}},
		{"filesystem.write[1]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\w`, `\\server\share`}}}},
		{"filesystem.write[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`/work`}}}},
		{"filesystem.read_only[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\w`}, ReadOnly: []string{`C:\w\.git.`}}}},
		{"filesystem.deny[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{`D:\`}}}},
		{"filesystem.deny[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{`\\?\C:\secret`}}}},
		{"filesystem.write[1]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\w`, `C:\Missing\x`}}}},
	} {
		in := input(c.policy)
		in.Exists = missing(`C:\missing`)
		if _, err := newPlan(in); !isUnenforceable(err, c.field) {
			t.Errorf("%s: NewPlan error %v, want an Unenforceable for the field with a mechanism, a finding and a remedy", c.field, err)
		}
	}
}

// What Linux and macOS cannot enforce, a job object can.
func TestLimitsAreEnforced(t *testing.T) {
	for _, l := range []*sandboxdv1.Limits{{MemoryBytes: 1 << 30}, {Pids: 64}, {CpuMillis: 500}} {
		if _, err := newPlan(input(&sandboxdv1.Policy{Limits: l})); err != nil {
			t.Errorf("limits %v refused: %v", l, err)
		}
	}
}
