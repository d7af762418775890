package daemon

import (
	"errors"
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
