//go:build linux || darwin

package conformance

import (
	"runtime"
	"testing"
)

// TestCasesFollowTheSharedList: cases() and the shared list name the same
// cases, and what a case's fields make of it here is what the list says
// for this OS.
func TestCasesFollowTheSharedList(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cases() {
		seen[c.name] = true
		o, ok := caseOutcomes[c.name]
		if !ok {
			t.Errorf("%q is not in the shared list (caseOutcomes)", c.name)
			continue
		}
		want := map[string]string{"linux": o.linux, "darwin": o.darwin}[runtime.GOOS]
		var got, field string
		switch {
		case c.refusesHere() != "":
			got, field = "refused", c.refusesHere()
		case runtime.GOOS == "linux" && c.darwinOnly != "", runtime.GOOS == "darwin" && c.linuxOnly != "":
			got = "not applicable"
		case runtime.GOOS == "darwin" && c.darwinWants != nil:
			got = "differs"
		default:
			got = "enforced"
		}
		if kind(want) != got || (got == "refused" && refusedField(want) != field) {
			t.Errorf("%q on %s: the case comes to %s %s, the shared list says %q", c.name, runtime.GOOS, got, field, want)
		}
	}
	for name := range caseOutcomes {
		if !seen[name] {
			t.Errorf("%q is in the shared list but not a case of cases()", name)
		}
	}
}
