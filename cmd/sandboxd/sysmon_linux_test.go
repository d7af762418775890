package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
		// Named as its binary, not "exe", once run again.
		if want := fmt.Sprintf("%d %s %s\n", cmd.Process.Pid, comm(os.Args[0]), tc.want); string(out) != want {
			t.Errorf("GODEBUG=%q: printed %q, want %q", tc.godebug, out, want)
		}
	}
}

func TestSysmonAwakeEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string // nil: nothing to do
	}{
		{"no GODEBUG", []string{"A=1"}, []string{"A=1", "GODEBUG=" + sysmonAwake}},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{"A=1", "GODEBUG=" + sysmonAwake}},
		{"other settings", []string{"GODEBUG=madvdontneed=1", "A=1"}, []string{"A=1", "GODEBUG=madvdontneed=1," + sysmonAwake}},
		{"the operator's schedtrace", []string{"GODEBUG=gctrace=1,schedtrace=1000"}, nil},
		{"run again", []string{"GODEBUG=" + sysmonAwake}, nil},
	} {
		got, ok := sysmonAwakeEnv(tc.env)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// A daemon whose binary is gone by the time it would run again (removed
// by an upgrade, say) runs again all the same: the process still has it.
func TestTheDaemonRunsAgainOnceItsBinaryIsRemoved(t *testing.T) {
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "sandboxd")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), sysmonChild+"="+sysmonAfterALine, "GODEBUG=madvdontneed=1")
	out := runAfterALine(t, cmd, func() error { return os.Remove(exe) })
	// Named as its binary, not "exe" after the file it ran again from.
	if want := fmt.Sprintf("%d sandboxd madvdontneed=1,%s\n", cmd.Process.Pid, sysmonAwake); out != want {
		t.Errorf("the daemon printed\n%q\nwant\n%q", out, want)
	}
}

// A daemon that cannot run again runs on as it is, and its log says so
// and why: here its GODEBUG, one string as long as execve takes, is too
// long once schedtrace is added.
func TestAFailedReexecIsLoggedAndTheDaemonRunsOn(t *testing.T) {
	// MAX_ARG_STRLEN, the terminating NUL included.
	const maxArgStrlen = 32 * 4096
	godebug := "madvdontneed=1,pad="
	godebug += strings.Repeat("x", maxArgStrlen-1-len("GODEBUG=")-len(godebug))
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), sysmonChild+"="+sysmonAfterALine, "GODEBUG="+godebug)
	out := runAfterALine(t, cmd, func() error { return nil })
	want := fmt.Sprintf("%d %s %s\nsandboxd: warning: running with the Go runtime's monitor thread left to sleep deeply (more CPU per launch; see docs/performance.md): run the daemon again from /proc/self/exe with GODEBUG=%s: argument list too long\n", cmd.Process.Pid, comm(os.Args[0]), godebug, sysmonAwake)
	if out != want {
		t.Errorf("the daemon printed\n%q\nwant\n%q", strings.Replace(out, godebug, "$GODEBUG", 1), strings.Replace(want, godebug, "$GODEBUG", 1))
	}
}

// runAfterALine starts cmd, a sysmonAfterALine child, does before, lets
// the child go on, and returns what it printed.
func runAfterALine(t *testing.T, cmd *exec.Cmd, before func() error) string {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = before()
	// End of input: the child executed again reads none either.
	in.Close()
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("%v, child %v:\n%s", err, werr, out.String())
	}
	return out.String()
}

// comm is the name the kernel gives a process that executes path.
func comm(path string) string {
	name := filepath.Base(path)
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}
