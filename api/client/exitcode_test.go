package client

import (
	"errors"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestExitCode(t *testing.T) {
	exit := func(e *sandboxdv1.Exit) *Result { return &Result{SessionID: "s", Exit: e} }
	for _, tc := range []struct {
		name string
		res  *Result
		err  error
		want int
	}{
		{"success", exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED}), nil, 0},
		{"own code", exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 42}), nil, 42},
		{"own 125 is passed through", exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 125}), nil, 125},
		{"killed by signal", exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: 2}), nil, 130},
		{"killed by daemon with signal", exit(&sandboxdv1.Exit{State: sandboxdv1.State_KILLED, Signal: 15, Reason: "operator"}), nil, 143},
		{"killed by daemon timeout", exit(&sandboxdv1.Exit{State: sandboxdv1.State_KILLED, Reason: "timeout"}), nil, 137},
		{"not found", exit(&sandboxdv1.Exit{State: sandboxdv1.State_FAILED_TO_START, ExitCode: 127}), nil, 127},
		{"cannot execute", exit(&sandboxdv1.Exit{State: sandboxdv1.State_FAILED_TO_START, ExitCode: 126}), nil, 126},
		{"failed to start otherwise", exit(&sandboxdv1.Exit{State: sandboxdv1.State_FAILED_TO_START, ExitCode: 1}), nil, 125},
		{"no exit state", exit(&sandboxdv1.Exit{ExitCode: 3}), nil, 125},
		{"error", nil, errors.New("refused"), 125},
		{"error wins over result", exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED}), errors.New("lost"), 125},
		{"no result", nil, nil, 125},
		{"no exit", &Result{}, nil, 125},
		{"detached", &Result{SessionID: "s", Detached: true}, nil, 0},
		{"detached but the error wins", &Result{SessionID: "s", Detached: true}, errors.New("lost"), 125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.res, tc.err); got != tc.want {
				t.Errorf("ExitCode = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnenforceableFromPlainErrors(t *testing.T) {
	if UnenforceableFrom(nil) != nil || UnenforceableFrom(errors.New("x")) != nil {
		t.Error("UnenforceableFrom found a detail in an error without one")
	}
}
