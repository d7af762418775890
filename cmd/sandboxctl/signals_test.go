package main

import "testing"

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]int32{"0": 0, "15": 15, "TERM": 15, "SIGTERM": 15, "int": 2, "SigKill": 9, "USR1": 10} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "65", "SIGFOO", "1.5"} {
		if got, err := parseSignal(in); err == nil {
			t.Errorf("parseSignal(%q) = %d, want error", in, got)
		}
	}
}
