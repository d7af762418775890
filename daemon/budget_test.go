package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestChildGetsWhatItsParentHasLeft(t *testing.T) {
	parent := &session{outCap: &outputCap{limit: 100, written: 60}, deadline: time.Now().Add(10 * time.Second)}
	child := &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(time.Minute), OutputBytes: 80}}
	if err := parent.budget(child); err != nil {
		t.Fatal(err)
	}
	if got := child.GetLimits().GetOutputBytes(); got != 40 {
		t.Errorf("output limit %d, want the parent's 40 left", got)
	}
	if got := child.GetLimits().GetTimeout().AsDuration(); got > 10*time.Second || got < 9*time.Second {
		t.Errorf("timeout %v, want about the parent's 10s left", got)
	}
	// Less than what is left is kept as asked.
	small := &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(time.Second), OutputBytes: 5}}
	if err := parent.budget(small); err != nil || small.GetLimits().GetOutputBytes() != 5 || small.GetLimits().GetTimeout().AsDuration() != time.Second {
		t.Errorf("narrower child changed: %v %v", small.GetLimits(), err)
	}
	// Unset inherits what is left.
	unset := &sandboxdv1.Policy{}
	if err := parent.budget(unset); err != nil || unset.GetLimits().GetOutputBytes() != 40 || unset.GetLimits().GetTimeout() == nil {
		t.Errorf("unset child: %v %v", unset.GetLimits(), err)
	}
}

func TestSpentBudgetRefusesTheChild(t *testing.T) {
	var we *policy.WidenError
	spent := &session{outCap: &outputCap{limit: 10, written: 10}}
	if err := spent.budget(&sandboxdv1.Policy{}); !errors.As(err, &we) || we.Field != "limits.output_bytes" {
		t.Errorf("spent output: %v", err)
	}
	late := &session{deadline: time.Now().Add(-time.Second)}
	if err := late.budget(&sandboxdv1.Policy{}); !errors.As(err, &we) || we.Field != "limits.timeout" {
		t.Errorf("time up: %v", err)
	}
	free := &session{}
	p := &sandboxdv1.Policy{}
	if err := free.budget(p); err != nil || p.GetLimits().GetTimeout() != nil || p.GetLimits().GetOutputBytes() != 0 {
		t.Errorf("unlimited parent: %v %v", p.GetLimits(), err)
	}
}

// A child's output is drawn from its parent's: two children cut to what
// their parent had left cannot each keep all of it, and what they keep
// is gone from the parent's own.
func TestChildrenDrawFromTheParentsOutput(t *testing.T) {
	parent := &session{outCap: &outputCap{limit: 100}}
	out := func(c *outputCap, n int) int {
		keep, _, _ := c.admit(&sandboxdv1.Output{Data: make([]byte, n)})
		return len(keep.GetData())
	}
	var kids []*session
	for range 2 {
		p := &sandboxdv1.Policy{}
		if err := parent.budget(p); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, &session{outCap: parent.childOutputCap(p.GetLimits().GetOutputBytes(), false)})
	}
	if got := out(kids[0].outCap, 70); got != 70 {
		t.Fatalf("first child kept %d of 70", got)
	}
	if got := out(kids[1].outCap, 70); got != 30 {
		t.Errorf("second child kept %d of 70, want the 30 its parent had left", got)
	}
	if left, _ := parent.outCap.remaining(); left != 0 {
		t.Errorf("parent has %d bytes left, want none", left)
	}
	if got := out(parent.outCap, 10); got != 0 {
		t.Errorf("parent kept %d bytes its children had used", got)
	}
	// A grandchild's budget is what the whole line above it has left,
	// and its refusal names the limit that is spent.
	grand := &sandboxdv1.Policy{}
	var we *policy.WidenError
	if err := kids[0].budget(grand); !errors.As(err, &we) || !strings.Contains(we.Msg, "an ancestor session has used all of its 100 bytes") {
		t.Errorf("grandchild of a spent grandparent: %d bytes, %v", grand.GetLimits().GetOutputBytes(), err)
	}
}
