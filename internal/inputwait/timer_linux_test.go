//go:build amd64

package inputwait

import (
	"testing"
	"time"
)

// TestTimerConfirmation: a timer due soon counts once checks have seen it
// for TimerConfirm, however far apart they come (the daemon checks less
// often while nothing changes), and stops counting once a check that sees
// none comes more than TimerConfirm after the last that did.
func TestTimerConfirmation(t *testing.T) {
	at := time.Unix(1000, 0)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	type check struct {
		at   time.Time
		seen bool
		want bool
	}
	cases := []struct {
		name   string
		checks []check
	}{
		{"seen all along at the fastest rate", []check{{ms(0), true, false}, {ms(50), true, false}, {ms(250), true, false}, {ms(300), true, true}, {ms(350), true, true}}},
		{"seen all along as checks slow down", []check{{ms(0), true, false}, {ms(50), true, false}, {ms(150), true, false}, {ms(350), true, true}, {ms(750), true, true}, {ms(1550), true, true}, {ms(3150), true, true}}},
		{"seen once at a check", []check{{ms(0), true, false}, {ms(50), false, false}, {ms(450), false, false}, {ms(850), true, false}}},
		{"gone: counts for TimerConfirm more", []check{{ms(0), true, false}, {ms(300), true, true}, {ms(500), false, true}, {ms(650), false, false}}},
		{"gone, then seen again starts over", []check{{ms(0), true, false}, {ms(300), true, true}, {ms(800), false, false}, {ms(900), true, false}, {ms(1250), true, true}}},
	}
	for _, c := range cases {
		p := &Probe{}
		for i, ch := range c.checks {
			p.noteTimer(ch.seen, ch.at)
			if got := p.timerConfirmed(ch.at); got != ch.want {
				t.Errorf("%s: check %d (at %v, timer seen %v): confirmed %v, want %v", c.name, i, ch.at.Sub(at), ch.seen, got, ch.want)
			}
		}
	}
}
