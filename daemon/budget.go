package daemon

import (
	"fmt"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
	"google.golang.org/protobuf/types/known/durationpb"
)

// budget narrows a child's policy, already narrowed against s's, to what
// s has left of the limits that run down: its time and its output, which
// the child then draws from (childOutputCap). The
// other limits need nothing here: the Linux backend places the child
// within s's cgroup, where s's memory, pids and CPU limits count both; the
// Windows backend, whose job objects do not nest, refuses a child that has
// them (a child of a parent with them always does); macOS refuses them.
func (s *session) budget(child *sandboxdv1.Policy) error {
	l := child.GetLimits()
	if l == nil {
		l = &sandboxdv1.Limits{}
		child.Limits = l
	}
	if !s.deadline.IsZero() {
		left := time.Until(s.deadline).Truncate(time.Millisecond)
		if left <= 0 {
			return &policy.WidenError{Field: policy.FieldLimitsTimeout, Msg: "the parent session's time is up"}
		}
		if t := l.GetTimeout(); t == nil || t.AsDuration() > left {
			l.Timeout = durationpb.New(left)
		}
	}
	if left, by := s.outCap.remaining(); by != nil {
		if left == 0 && by == s.outCap {
			return &policy.WidenError{Field: policy.FieldLimitsOutputBytes, Msg: fmt.Sprintf("the parent session has used all of its %d bytes of output", by.limit)}
		}
		if left == 0 {
			return &policy.WidenError{Field: policy.FieldLimitsOutputBytes, Msg: fmt.Sprintf("an ancestor session has used all of its %d bytes of output, which its descendants' output counts against", by.limit)}
		}
		if n := l.GetOutputBytes(); n == 0 || n > left {
			l.OutputBytes = left
		}
	}
	return nil
}

// childOutputCap is the cap of a child of s whose policy keeps limit
// bytes of output (nil for none): what it keeps is drawn from s's too.
func (s *session) childOutputCap(limit uint64, tty bool) *outputCap {
	if limit == 0 {
		return nil
	}
	return &outputCap{limit: limit, tty: tty, parent: s.outCap}
}

func (s *session) closeProxy() {
	if s.proxy != nil {
		s.proxy.Close()
	}
}

// streamName is how a denial names the stream output went to.
func streamName(st sandboxdv1.Output_Stream, tty bool) string {
	switch {
	case tty:
		return "terminal"
	case st == sandboxdv1.Output_STDERR:
		return "stderr"
	}
	return "stdout"
}
