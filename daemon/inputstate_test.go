package daemon

import (
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestProgressStatesDwell(t *testing.T) {
	const (
		running = sandboxdv1.State_RUNNING
		waiting = sandboxdv1.State_WAITING
		network = sandboxdv1.State_WAITING_FOR_NETWORK
		input   = sandboxdv1.State_WAITING_FOR_INPUT
	)
	at := time.Unix(1000, 0)
	cases := []struct {
		shown, to sandboxdv1.State
		since     time.Duration
		want      time.Duration
	}{
		{running, network, 100 * time.Millisecond, progressDwell - 100*time.Millisecond},
		{network, running, 300 * time.Millisecond, progressDwell - 300*time.Millisecond},
		{waiting, network, 0, progressDwell},
		{running, waiting, progressDwell, 0},
		{running, waiting, 5 * time.Second, 0},
		{running, running, 0, 0},
		// Waiting for input is never held back, nor leaving it.
		{running, input, 0, 0},
		{input, running, 0, 0},
		{input, network, 10 * time.Millisecond, 0},
	}
	for _, c := range cases {
		w := &inputWatch{shown: c.shown, shownAt: at.Add(-c.since)}
		if got := w.holdFor(c.to, at); got != c.want {
			t.Errorf("%v for %v, then %v: held %v, want %v", c.shown, c.since, c.to, got, c.want)
		}
	}
}
