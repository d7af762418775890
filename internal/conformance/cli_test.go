//go:build linux || darwin

package conformance

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// TestSandboxctlConventions runs the built sandboxctl against the suite's
// daemon as a shell or a script would: help on stdout, usage errors exit
// 2, ps lists live sessions and ps -a ended ones too, logs prints what the
// daemon kept, run --json ends stdout with the status, and top writes no
// screen codes into a pipe.
func TestSandboxctlConventions(t *testing.T) {
	f := newFixture(t)
	t.Run("help and usage errors", func(t *testing.T) {
		for _, tc := range []struct {
			args   []string
			code   int
			stdout string
			stderr string
		}{
			{[]string{"--help"}, 0, "usage: sandboxctl [--socket PATH] COMMAND", ""},
			{[]string{"run", "--help"}, 0, "usage: sandboxctl run [flags] -- CMD", ""},
			{[]string{"run", "--timeout", "5", "--", trueCmd}, 2, "", "sandboxctl run: --timeout 5: missing unit, e.g. 5s\n"},
			{[]string{"run"}, 2, "", "sandboxctl run: missing command\n"},
			{[]string{"ps", "--jsno"}, 2, "", "sandboxctl ps: unknown flag --jsno; did you mean --json?\n"},
			{[]string{"rnu", "--", trueCmd}, 2, "", `sandboxctl: unknown command "rnu"; did you mean "run"?`},
		} {
			r := sandboxctl(t, f.dir, tc.args...)
			if r.code != tc.code || !strings.HasPrefix(r.stdout, tc.stdout) || !strings.HasPrefix(r.stderr, tc.stderr) ||
				(tc.stdout == "") != (r.stdout == "") || (tc.stderr == "") != (r.stderr == "") {
				t.Errorf("sandboxctl %q: exit %d, stdout %q, stderr %q; want %d, %q..., %q...", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
		}
	})

	token := randomHex()
	detached := func(script string) string {
		t.Helper()
		r := sandboxctl(t, f.dir, "run", "--detach", "--", "/bin/sh", "-c", script)
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("run --detach: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		return id
	}
	ended := detached("echo ended-" + token + "; echo to-stderr-" + token + " >&2")
	waitState(t, ended, sandboxdv1.State_EXITED)
	live := detached("echo live-" + token + "; exec sleep 60")
	t.Cleanup(func() { sandboxctl(t, f.dir, "kill", live) })
	waitState(t, live, sandboxdv1.State_RUNNING)

	t.Run("ps lists live sessions, ps -a ended ones too", func(t *testing.T) {
		ids := func(args ...string) []string {
			t.Helper()
			r := sandboxctl(t, f.dir, append([]string{"ps", "-q"}, args...)...)
			if r.code != 0 {
				t.Fatalf("ps -q %q: exit %d, stderr %q", args, r.code, r.stderr)
			}
			return strings.Fields(r.stdout)
		}
		if got := ids(); !slices.Contains(got, live) || slices.Contains(got, ended) {
			t.Errorf("ps -q: %q; want %s (live) and not %s (ended)", got, live, ended)
		}
		if got := ids("-a"); !slices.Contains(got, live) || !slices.Contains(got, ended) {
			t.Errorf("ps -a -q: %q; want %s and %s", got, live, ended)
		}
		r := sandboxctl(t, f.dir, "ps", "-a", "--json")
		var list []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
			t.Fatalf("ps -a --json: exit %d, %v, stdout %q", r.code, err, r.stdout)
		}
		states := map[string]string{}
		for _, s := range list {
			states[s.ID] = s.State
		}
		if states[live] != "running" || states[ended] != "exited" {
			t.Errorf("ps -a --json: states %v; want %s running, %s exited", states, live, ended)
		}
	})

	t.Run("logs of an ended session", func(t *testing.T) {
		r := sandboxctl(t, f.dir, "logs", ended)
		if r.code != 0 || r.stdout != "ended-"+token+"\n" || r.stderr != "to-stderr-"+token+"\n" {
			t.Errorf("logs: exit %d, stdout %q, stderr %q; want 0 and the session's output", r.code, r.stdout, r.stderr)
		}
		if r := sandboxctl(t, f.dir, "logs", "0000000000000000"); r.code != 1 || !strings.Contains(r.stderr, "logs 0000000000000000") {
			t.Errorf("logs of no session: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("logs of a live session prints what was kept and returns", func(t *testing.T) {
		r := sandboxctl(t, f.dir, "logs", live)
		if r.code != 0 || !strings.Contains(r.stdout, "live-"+token) {
			t.Errorf("logs of a running session: exit %d, stdout %q, stderr %q; want 0 and its kept output", r.code, r.stdout, r.stderr)
		}
		if st := inspect(t, live).GetState(); st != sandboxdv1.State_RUNNING {
			t.Errorf("the session is %v after logs, want it running on", st)
		}
		if r := sandboxctl(t, f.dir, "kill", live); r.code != 0 {
			t.Fatalf("kill: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("run --json ends stdout with the status", func(t *testing.T) {
		r := sandboxctl(t, f.dir, "run", "--json", "--", "/bin/sh", "-c", "printf partial; exit 3")
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		var st struct {
			SessionID string `json:"session_id"`
			State     string `json:"state"`
			ExitCode  int    `json:"exit_code"`
		}
		if r.code != 3 || len(lines) != 2 || lines[0] != "partial" || json.Unmarshal([]byte(lines[1]), &st) != nil ||
			st.SessionID == "" || st.State != "exited" || st.ExitCode != 3 {
			t.Errorf("run --json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("top into a pipe", func(t *testing.T) {
		r := sandboxctl(t, f.dir, "top", "-a", "-n", "2", "--interval", "50ms")
		if r.code != 0 || strings.Contains(r.stdout, "\x1b") || strings.Count(r.stdout, "\nID ") != 2 || !strings.Contains(r.stdout, ended) {
			t.Errorf("top -a -n 2: exit %d, stderr %q, stdout\n%q", r.code, r.stderr, r.stdout)
		}
	})
}
