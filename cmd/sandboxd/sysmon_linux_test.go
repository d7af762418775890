package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestTheDaemonRunsWithItsMonitorAwake(t *testing.T) {
	for _, tc := range []struct{ godebug, want string }{
		{"", sysmonAwake},
		{"madvdontneed=1", "madvdontneed=1," + sysmonAwake},
		// The operator's own setting stands.
		{"schedtrace=1000", "schedtrace=1000"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), sysmonChild+"=1")
		if tc.godebug != "" {
			cmd.Env = append(cmd.Env, "GODEBUG="+tc.godebug)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GODEBUG=%q: %v", tc.godebug, err)
		}
		// Executed again in place: the pid a supervisor knows stays.
		if want := fmt.Sprintf("%d %s\n", cmd.Process.Pid, tc.want); string(out) != want {
			t.Errorf("GODEBUG=%q: printed %q, want %q", tc.godebug, out, want)
		}
	}
}
