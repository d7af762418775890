package conformance

import "fmt"

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
