package launcherlinux

import (
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestEqualReportsAreShared(t *testing.T) {
	rep := func(mech string) *sandboxdv1.EnforcementReport {
		return &sandboxdv1.EnforcementReport{Backend: "linux", MechanismSet: "namespaces",
			Fields: []*sandboxdv1.FieldEnforcement{{Field: "filesystem.write", Mechanism: mech}}}
	}
	a, b := sharedReport(rep("mount-ns ro-binds")), sharedReport(rep("mount-ns ro-binds"))
	if a != b {
		t.Errorf("two equal reports are kept twice")
	}
	c := sharedReport(rep("landlock"))
	if c == a || c.GetFields()[0].GetMechanism() != "landlock" {
		t.Errorf("a report of another mechanism got the first one's: %v", c)
	}
}
