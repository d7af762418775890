package launcherwindows

import (
	"errors"
	"strings"
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

// Every name of a file shares its DACL: a write root, carve-out or deny
// path that is a hard link to a file elsewhere (a child's write root
// inside its parent's, say, linked to a system file) would have the
// service, which may change any DACL, stamp entries on that file.
func TestHardLinkedPathsAreRefused(t *testing.T) {
	const ws, link = `C:\w`, `C:\w\hosts`
	kind := func(links uint32, err error) func(string) (bool, uint32, error) {
		return func(p string) (bool, uint32, error) {
			if samePath(cleanPath(p), link) {
				return false, links, err
			}
			return true, 1, nil
		}
	}
	for _, c := range []struct {
		field string
		pol   *sandboxdv1.Policy
	}{
		{"filesystem.write[1]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`D:\other`, link}}}},
		{"filesystem.read_only[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, ReadOnly: []string{link}}}},
		{"filesystem.deny[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, Deny: []string{link}}}},
		{"filesystem.deny[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Deny: []string{link}}}},
	} {
		in := input(c.pol)
		in.Kind = kind(2, nil)
		_, err := newPlan(in)
		if !isUnenforceable(err, c.field) || !strings.Contains(err.Error(), link) {
			t.Errorf("%s a file of two names: %v, want refused naming %s", c.field, err, link)
		}
		in.Kind = kind(0, errors.New("sharing violation"))
		if _, err := newPlan(in); !isUnenforceable(err, c.field) {
			t.Errorf("%s whose kind cannot be read: %v, want refused", c.field, err)
		}
		in.Kind = nil
		if _, err := newPlan(in); !isUnenforceable(err, "filesystem.") {
			t.Errorf("%s with nothing to say what it is: %v, want refused", c.field, err)
		}
		in.Kind = kind(1, nil)
		if _, err := newPlan(in); err != nil {
			t.Errorf("%s a file of one name: %v", c.field, err)
		}
	}
	in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}, Deny: []string{link}}})
	in.Kind, in.Exists = kind(2, nil), missing(link)
	if _, err := newPlan(in); err != nil {
		t.Errorf("a missing deny path, made as a directory: %v", err)
	}
}
