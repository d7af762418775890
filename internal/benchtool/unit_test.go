//go:build linux

package main

import (
	"os"
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

func TestUnitFlagReadsExecStart(t *testing.T) {
	unit := t.TempDir() + "/u.service"
	if err := os.WriteFile(unit, []byte("[Service]\nExecStart=/usr/bin/sandboxd --socket /s --max-sessions=5000 --retain-ended 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"--max-sessions": "5000", "--retain-ended": "3", "--socket": "/s"} {
		if v, ok, err := unitFlag(unit, flag); err != nil || !ok || v != want {
			t.Errorf("unitFlag(%s) = %q, %v, %v; want %q", flag, v, ok, err, want)
		}
	}
	if _, ok, err := unitFlag(unit, "--max-streams"); ok || err != nil {
		t.Errorf("unitFlag found --max-streams, which the unit does not set (err %v)", err)
	}
}
