package conformance

import (
	"fmt"
	"strings"
	"testing"
)

// want is what a policy says about one probe step.
type want int

const (
	// allowed: the step must succeed.
	allowed want = iota
	// denied: the step must fail.
	denied
	// either: the step only prepares a later one, which carries the
	// verdict (e.g. plant a hardlink, then write through it).
	either
)

func (w want) String() string {
	return [...]string{"allowed", "denied", "either"}[w]
}

type step struct {
	args []string
	want want
}

func allow(args ...string) step   { return step{args, allowed} }
func deny(args ...string) step    { return step{args, denied} }
func prepare(args ...string) step { return step{args, either} }

// outcome is one line of probe output.
type outcome struct {
	Op     string `json:"op"`
	OK     bool   `json:"ok"`
	Errno  string `json:"errno"`
	Detail any    `json:"detail"`
}

func (o outcome) String() string {
	if o.OK {
		return fmt.Sprintf("%s: ok (%v)", o.Op, o.Detail)
	}
	return fmt.Sprintf("%s: failed %s (%v)", o.Op, o.Errno, o.Detail)
}

func (o outcome) detail() string {
	s, _ := o.Detail.(string)
	return s
}

// checkSteps fails the test for every step whose outcome is not what the
// policy says, and returns each step's success, for comparing paths. shown
// is what the session printed, for a probe that reported too few steps.
func checkSteps(t *testing.T, steps []step, outcomes []outcome, shown string) []bool {
	t.Helper()
	if len(outcomes) != len(steps) {
		t.Fatalf("probe reported %d steps, want %d\n%s", len(outcomes), len(steps), shown)
	}
	oks := make([]bool, len(steps))
	for i, st := range steps {
		o := outcomes[i]
		oks[i] = o.OK
		t.Logf("%s (%v): %s", strings.Join(st.args, " "), st.want, o)
		switch {
		case st.want == allowed && !o.OK:
			t.Errorf("%s must be allowed, got %s", strings.Join(st.args, " "), o)
		case st.want == denied && o.OK:
			t.Errorf("%s must be denied, got %s", strings.Join(st.args, " "), o)
		}
	}
	return oks
}
