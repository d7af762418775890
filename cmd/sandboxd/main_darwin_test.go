package main

import "testing"

func TestCheckMechanismDarwin(t *testing.T) {
	for _, name := range []string{"", "seatbelt"} {
		if err := checkMechanism(name); err != nil {
			t.Errorf("checkMechanism(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"namespaces", "landlock", "Seatbelt"} {
		if err := checkMechanism(name); err == nil {
			t.Errorf("checkMechanism(%q) = nil, want an error", name)
		}
	}
}
