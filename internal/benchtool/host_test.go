//go:build linux

package main

import (
	"testing"
	"time"
)

// The reported p50 and p99 are nearest-rank: always a sample, never
// interpolated, and p99 of 100 samples is the 99th smallest.
func TestPercentileIsNearestRank(t *testing.T) {
	var d durations
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := d.percentile(c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := (durations{7 * time.Millisecond}).percentile(99); got != 7*time.Millisecond {
		t.Errorf("p99 of one sample = %v", got)
	}
	if d[0] != 100*time.Millisecond {
		t.Error("percentile sorted the caller's samples in place")
	}
}
