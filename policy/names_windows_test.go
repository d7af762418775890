package policy

import (
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// NTFS compares names without regard to case, so must the policy: else a
// child writing C:\w\.GIT would escape its parent's carve-out C:\w\.git.
func TestPathsIgnoreCaseOnWindows(t *testing.T) {
	p := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\Work`}, ReadOnly: []string{`c:\work\.git`}}}
	if err := Validate(p); err != nil {
		t.Fatalf("a carve-out spelled in another case is within its write root: %v", err)
	}
	if got := Normalize(p).GetFilesystem().GetReadOnly(); len(got) != 1 {
		t.Errorf("normalizing dropped the carve-out: %v", got)
	}
	parent := Normalize(p)
	child := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{`C:\WORK\.GIT`}}}
	if _, err := Narrow(parent, child); err == nil {
		t.Errorf("a child may write the parent's carve-out spelled in another case")
	}
}
