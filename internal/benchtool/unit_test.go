//go:build linux

package main

import (
	"slices"
	"testing"
)

func TestUnitLimitsOfTheShippedUnit(t *testing.T) {
	limits, err := unitLimits("../../deploy/sandboxd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"LimitNOFILE", "TasksMax"} {
		if !slices.ContainsFunc(limits, func(l unitLimit) bool { return l.key == key }) {
			t.Errorf("unitLimits found %v, without %s", limits, key)
		}
	}
	for _, l := range limits {
		if _, ok := parseLimit(l.value); !ok {
			t.Errorf("%s=%s: benchtool cannot read the value", l.key, l.value)
		}
	}
}
