package daemon

import "testing"

func TestCheckMechanismSetDarwin(t *testing.T) {
	for _, name := range []string{"", "seatbelt"} {
		if err := CheckMechanismSet(name); err != nil {
			t.Errorf("CheckMechanismSet(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"namespaces", "landlock", "Seatbelt"} {
		if err := CheckMechanismSet(name); err == nil {
			t.Errorf("CheckMechanismSet(%q) = nil, want an error", name)
		}
	}
}
