package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Watch sends nothing until the client goes: top redraws on its ticks.
func (d *fakeDaemon) Watch(_ *sandboxdv1.WatchRequest, s grpc.ServerStreamingServer[sandboxdv1.Event]) error {
	<-s.Context().Done()
	return nil
}

func TestHelpGoesToStdoutAndExits0(t *testing.T) {
	type helpCase struct {
		args []string
		want string
	}
	cases := []helpCase{
		{[]string{"--help"}, "usage: sandboxctl [--socket PATH] COMMAND"},
		{[]string{"-h"}, "usage: sandboxctl [--socket PATH] COMMAND"},
		{[]string{"help"}, "usage: sandboxctl [--socket PATH] COMMAND"},
	}
	for _, name := range verbNames() {
		want := "usage: sandboxctl " + name
		cases = append(cases, helpCase{[]string{name, "--help"}, want}, helpCase{[]string{name, "-h"}, want}, helpCase{[]string{"help", name}, want})
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := sandboxctl(t, "", tc.args...)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, tc.want) {
				t.Errorf("code %d, stderr %q, stdout %q; want 0, nothing, and %q", code, stderr, stdout, tc.want)
			}
		})
	}
	// The list of commands names every one, with what it does.
	_, stdout, _ := sandboxctl(t, "", "--help")
	for _, name := range verbNames() {
		if !strings.Contains(stdout, "\n  "+name+" ") {
			t.Errorf("--help does not list %s:\n%s", name, stdout)
		}
	}
}

// TestUsageIsWrittenOnceForHelp: the flag package runs a FlagSet's Usage
// itself on --help and on a mistake, before parseFlags prints the help or
// words the mistake; a usage written into nothing there was half of what
// sandboxctl --help did.
func TestUsageIsWrittenOnceForHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{{[]string{"--help"}, 1}, {[]string{"-h"}, 1}, {[]string{"--nope"}, 0}, {[]string{"-n"}, 0}, {nil, 0}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Int("n", 0, "a number")
		calls := 0
		fs.Usage = func() { calls++ }
		c := &cli{stdout: io.Discard, stderr: io.Discard}
		c.parseFlags(fs, tc.args)
		if calls != tc.want {
			t.Errorf("%q: Usage ran %d times, want %d", tc.args, calls, tc.want)
		}
	}
}

// TestUsageErrorsExit2 runs a mistake of each kind on every verb: one line
// on stderr saying what is wrong and where the help is, nothing on
// stdout, exit 2, and nothing dialed (there is no daemon here).
func TestUsageErrorsExit2(t *testing.T) {
	type usageCase struct {
		args []string
		want string
	}
	var cases []usageCase
	for _, name := range verbNames() {
		want := "sandboxctl " + name + ": unknown flag --bogus\nRun 'sandboxctl " + name + " --help' for usage.\n"
		cases = append(cases, usageCase{[]string{name, "--bogus"}, want})
	}
	cases = append(cases, []usageCase{
		{[]string{"--bogus"}, "sandboxctl: unknown flag --bogus\nRun 'sandboxctl --help' for usage.\n"},
		{[]string{"frobnicate"}, "sandboxctl: unknown command \"frobnicate\"\nRun 'sandboxctl --help' for usage.\n"},
		{[]string{"help", "frobnicate"}, "sandboxctl: unknown command \"frobnicate\"\n"},
		{nil, "usage: sandboxctl [--socket PATH] COMMAND"},
		{[]string{"run"}, "sandboxctl run: missing command\n"},
		{[]string{"run", "--memory"}, "sandboxctl run: --memory needs a value\n"},
		{[]string{"run", "--tty=maybe", "--", "true"}, "sandboxctl run: --tty maybe: want true or false\n"},
		{[]string{"inspect"}, "sandboxctl inspect: missing session ID\n"},
		{[]string{"inspect", "a", "b"}, "sandboxctl inspect: unexpected argument \"b\"\n"},
		{[]string{"logs"}, "sandboxctl logs: missing session ID\n"},
		{[]string{"kill"}, "sandboxctl kill: missing session ID\n"},
		{[]string{"kill", "--signal", "BOGUS", "a1"}, "sandboxctl kill: --signal BOGUS: unknown signal \"BOGUS\"\n"},
		{[]string{"attach", "a", "b"}, "sandboxctl attach: unexpected argument \"b\"\n"},
		{[]string{"ps", "x"}, "sandboxctl ps: unexpected argument \"x\"\n"},
		{[]string{"ps", "-q", "--json"}, "sandboxctl ps: -q and --json: choose one\n"},
		{[]string{"inspect", "a", "--bogus"}, "sandboxctl inspect: unknown flag --bogus\n"},
		{[]string{"inspect", "--", "a", "--json"}, "sandboxctl inspect: unexpected argument \"--json\"\n"},
		{[]string{"doctor", "x"}, "sandboxctl doctor: unexpected argument \"x\"\n"},
		{[]string{"events", "--until-end"}, "sandboxctl events: --until-end needs --session\n"},
		{[]string{"top", "--interval", "0s"}, "sandboxctl top: --interval 0s: must be above 0\n"},
	}...)
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("SANDBOXD_SOCKET", "/nonexistent/sandboxd.sock")
			code, stdout, stderr := sandboxctl(t, "", tc.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("code %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rnu"}, `unknown command "rnu"; did you mean "run"?`},
		{[]string{"sp"}, `unknown command "sp"; did you mean "ps"?`},
		{[]string{"inpsect", "a1"}, `unknown command "inpsect"; did you mean "inspect"?`},
		{[]string{"atach"}, `unknown command "atach"; did you mean "attach"?`},
		{[]string{"log"}, `unknown command "log"; did you mean "logs"?`},
		{[]string{"xyzzy"}, "unknown command \"xyzzy\"\n"},
		{[]string{"--sokcet", "/s", "ps"}, "unknown flag --sokcet; did you mean --socket?"},
		{[]string{"run", "--tiemout", "5s", "--", "true"}, "unknown flag --tiemout; did you mean --timeout?"},
		{[]string{"run", "--wirte=/tmp", "--", "true"}, "unknown flag --wirte; did you mean --write?"},
		{[]string{"run", "--deny-host", "x", "--", "true"}, "unknown flag --deny-host\n"},
		{[]string{"ps", "--jsno"}, "unknown flag --jsno; did you mean --json?"},
		{[]string{"ps", "-all"}, "unknown flag --all; did you mean -a?"},
		{[]string{"ps", "-x"}, "unknown flag -x\n"},
		{[]string{"events", "--sesion", "a1"}, "unknown flag --sesion; did you mean --session?"},
		{[]string{"attach", "--readonly", "a1"}, "unknown flag --readonly; did you mean --read-only?"},
		{[]string{"kill", "--sginal", "TERM", "a1"}, "unknown flag --sginal; did you mean --signal?"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := sandboxctl(t, "", tc.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "usage:") {
				t.Errorf("code %d, stdout %q, stderr %q; want %d and only %q", code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestDurationsSayWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--timeout", "5", "--", "true"}, "sandboxctl run: --timeout 5: missing unit, e.g. 5s\n"},
		{[]string{"run", "--timeout=1.5", "--", "true"}, "sandboxctl run: --timeout 1.5: missing unit, e.g. 1.5s\n"},
		{[]string{"run", "--timeout", "soon", "--", "true"}, "sandboxctl run: --timeout soon: not a duration: want a number with a unit (ns, us, ms, s, m, h), e.g. 30s, 5m or 1h30m\n"},
		{[]string{"top", "--interval", "2"}, "sandboxctl top: --interval 2: missing unit, e.g. 2s\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := sandboxctl(t, "", tc.args...)
			if code != exitUsage || !strings.HasPrefix(stderr, tc.want) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	platform := fmt.Sprintf("go1.26.0 %s/%s", runtime.GOOS, runtime.GOARCH)
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
			Settings: settings("vcs", "git", "vcs.revision", "98232ad0e9f1", "vcs.modified", "false")},
			"sandboxctl version v1.2.3, commit 98232ad0e9f1, " + platform},
		{"local change", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261125171218-98232ad0e9f1+dirty"},
			Settings: settings("vcs.revision", "98232ad0e9f1", "vcs.modified", "true")},
			"sandboxctl version v0.0.0-20261125171218-98232ad0e9f1+dirty, commit 98232ad0e9f1 (with uncommitted changes), " + platform},
		{"no VCS", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"sandboxctl version unknown, commit unknown (built without VCS information), " + platform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionLine(tc.bi); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	code, stdout, stderr := sandboxctl(t, "", "--version")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "sandboxctl version ") || !strings.Contains(stdout, ", commit ") {
		t.Errorf("--version: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestVersionOfABuiltBinary builds sandboxctl in this checkout, with VCS
// stamping asked for (a go env may turn it off), and checks that
// --version names the commit checked out.
func TestVersionOfABuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sandboxctl")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "sandboxctl")
	build := exec.Command(gobin, "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("sandboxctl --version: %v", err)
	}
	if want := "commit " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("sandboxctl --version = %q; want it to name %q", out, want)
	}
}

func TestPsListsLiveSessionsAndAllWithA(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{sessions: family()})
	ids := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := sandboxctl(t, "", append([]string{"--socket", sock, "ps"}, args...)...)
		if code != 0 {
			t.Fatalf("ps %q: code %d, stderr %q", args, code, stderr)
		}
		return strings.Join(strings.Fields(stdout), " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-q"}, "c2 r1 g1 c1 r2"},
		{[]string{"-a", "-q"}, "c2 r1 o1 g1 c1 r2"},
		{[]string{"--tree", "-q"}, "r1 c1 g1 c2 r2"},
	} {
		if got := ids(tc.args...); got != tc.want {
			t.Errorf("ps %q: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := ids(); strings.Contains(got, "o1") || !strings.Contains(got, "r2 running") {
		t.Errorf("ps: %q, want the live sessions only", got)
	}
}

func TestPsJSON(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{sessions: family()})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--json"}, "c2 running,r1 running,g1 waiting-for-input,c1 running,r2 running"},
		{[]string{"-a", "--json"}, "c2 running,r1 running,o1 exited,g1 waiting-for-input,c1 running,r2 running"},
		{[]string{"--tree", "--json"}, "r1 running,c1 running,g1 waiting-for-input,c2 running,r2 running"},
	} {
		code, stdout, stderr := sandboxctl(t, "", append([]string{"--socket", sock, "ps"}, tc.args...)...)
		var got []struct {
			ID       string   `json:"id"`
			State    string   `json:"state"`
			Argv     []string `json:"argv"`
			ExitCode *int     `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil {
			t.Fatalf("ps %q: code %d, %v, stderr %q, stdout\n%s", tc.args, code, err, stderr, stdout)
		}
		var rows []string
		for _, s := range got {
			rows = append(rows, s.ID+" "+s.State)
			if len(s.Argv) == 0 || s.ExitCode == nil {
				t.Errorf("ps %q: session %s without argv or exit_code", tc.args, s.ID)
			}
		}
		if strings.Join(rows, ",") != tc.want {
			t.Errorf("ps %q: %q, want %q", tc.args, rows, tc.want)
		}
	}
	// No live session is an empty array, not null.
	sock = startDaemon(t, &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{{Id: "e1", State: sandboxdv1.State_KILLED}}})
	if code, stdout, _ := sandboxctl(t, "", "--socket", sock, "ps", "--json"); code != 0 || stdout != "[]\n" {
		t.Errorf("ps --json with only ended sessions: code %d, stdout %q", code, stdout)
	}
}

func TestInspectTakesJSON(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{})
	_, plain, _ := sandboxctl(t, "", "--socket", sock, "inspect", "a1b2")
	for _, args := range [][]string{{"--json", "a1b2"}, {"a1b2", "--json"}, {"--json", "--", "a1b2"}} {
		code, out, stderr := sandboxctl(t, "", append([]string{"--socket", sock, "inspect"}, args...)...)
		if code != 0 || out != plain || !json.Valid([]byte(out)) {
			t.Errorf("inspect %q: code %d, stderr %q, stdout %q; want %q", args, code, stderr, out, plain)
		}
	}
}

// Flags may follow a verb's argument, as docker and kubectl allow.
func TestFlagsAfterTheSessionID(t *testing.T) {
	d := &fakeDaemon{killed: make(chan *sandboxdv1.KillRequest, 1)}
	sock := startDaemon(t, d)
	code, _, stderr := sandboxctl(t, "", "--socket", sock, "kill", "a1b2", "--signal", "TERM")
	if code != 0 {
		t.Fatalf("kill ID --signal TERM: code %d, stderr %q", code, stderr)
	}
	if req := <-d.killed; req.GetId() != "a1b2" || req.GetSignal() != 15 {
		t.Errorf("kill ID --signal TERM sent %v", req)
	}
}

func TestRunJSONStatus(t *testing.T) {
	exits := func(exit *sandboxdv1.Exit, output string) func(sessionStream) error {
		return func(s sessionStream) error {
			if _, err := s.Recv(); err != nil {
				return err
			}
			return sendAll(s, &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: "j1", PolicyDigest: "sha256:ab"}}},
				outputMsg(sandboxdv1.Output_STDOUT, output), exitMsg(exit))
		}
	}
	refusal := func(s sessionStream) error {
		st, err := status.New(codes.FailedPrecondition, "cannot enforce network.mode").WithDetails(&sandboxdv1.Unenforceable{
			Field: "network.mode", Mechanism: "network namespace", Remedy: "run the daemon as root",
		})
		if err != nil {
			return err
		}
		return st.Err()
	}
	detached := func(s sessionStream) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		return s.Send(startedMsg("d1"))
	}
	for _, tc := range []struct {
		name    string
		session func(sessionStream) error
		detach  bool
		code    int
		output  string
		status  string
	}{
		{"exit code", exits(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 3}, "no newline"), false, 3, "no newline\n",
			`{"session_id":"j1","policy_digest":"sha256:ab","state":"exited","exit_code":3}`},
		{"killed", exits(&sandboxdv1.Exit{State: sandboxdv1.State_KILLED, Signal: 9, Reason: "timeout"}, "line\n"), false, 137, "line\n",
			`{"session_id":"j1","policy_digest":"sha256:ab","state":"killed","exit_code":137,"signal":9,"reason":"timeout"}`},
		{"refused", refusal, false, 125, "",
			`{"exit_code":125,"error":"start session: cannot enforce network.mode","refusal":{"field":"network.mode","mechanism":"network namespace","remedy":"run the daemon as root"}}`},
		{"detached", detached, true, 0, "",
			`{"session_id":"d1","state":"running","detached":true,"exit_code":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := startDaemon(t, &fakeDaemon{session: tc.session})
			args := []string{"--socket", sock, "run", "--json"}
			if tc.detach {
				args = append(args, "--detach")
			}
			code, stdout, stderr := sandboxctl(t, "", append(args, "--", "x")...)
			if code != tc.code || stdout != tc.output+tc.status+"\n" {
				t.Errorf("code %d, stderr %q, stdout\n%s\nwant %d and\n%s", code, stderr, stdout, tc.code, tc.output+tc.status+"\n")
			}
		})
	}
	t.Run("policy refused by sandboxctl", func(t *testing.T) {
		code, stdout, _ := sandboxctl(t, "", "--socket", "/nonexistent/sandboxd.sock", "run", "--json", "--read-only", "/etc", "--", "x")
		var st struct {
			ExitCode int    `json:"exit_code"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal([]byte(stdout), &st); code != 125 || err != nil || st.ExitCode != 125 || !strings.Contains(st.Error, "filesystem.read_only[0]") {
			t.Errorf("code %d, stdout %q", code, stdout)
		}
	})
}

func TestLogsPrintsTheKeptOutput(t *testing.T) {
	ended := &sandboxdv1.SessionInfo{Id: "e1", State: sandboxdv1.State_EXITED, ExitCode: 3}
	sock := startDaemon(t, &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{ended}, session: func(s sessionStream) error {
		att, err := s.Recv()
		if err != nil {
			return err
		}
		if id := att.GetAttach().GetId(); id != "e1" {
			return status.Errorf(codes.NotFound, "no session %q", id)
		}
		if !att.GetAttach().GetReadOnly() {
			return fmt.Errorf("logs attached interactively: %v", att)
		}
		if !att.GetAttach().GetOmitEnforcement() {
			return fmt.Errorf("logs asked for the enforcement report it does not print: %v", att)
		}
		return sendAll(s, startedMsg("e1"), outputMsg(sandboxdv1.Output_STDOUT, "kept\n"), outputMsg(sandboxdv1.Output_STDERR, "warned\n"),
			outputMsg(sandboxdv1.Output_STDOUT, "more\n"), exitMsg(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 3}))
	}})
	code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "logs", "e1")
	if code != 0 || stdout != "kept\nmore\n" || stderr != "warned\n" {
		t.Errorf("code %d, stdout %q, stderr %q; want 0, the kept output", code, stdout, stderr)
	}
	code, stdout, stderr = sandboxctl(t, "", "--socket", sock, "logs", "zz")
	if code != exitFailed || stdout != "" || !strings.HasPrefix(stderr, "sandboxctl: logs zz: ") {
		t.Errorf("missing session: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestTopPrintsPlainSnapshotsWhenStdoutIsNotATerminal(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{sessions: family()})
	code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "top", "-n", "2", "--interval", "10ms")
	if code != 0 || stderr != "" {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	if strings.Contains(stdout, "\x1b") {
		t.Errorf("escape codes written to a non-terminal:\n%q", stdout)
	}
	snapshots := strings.Split(stdout, "\n\nsandboxd ")
	if len(snapshots) != 2 || !strings.HasPrefix(stdout, "sandboxd ") {
		t.Fatalf("want two snapshots, a blank line between them:\n%s", stdout)
	}
	for _, s := range snapshots {
		if !strings.Contains(s, "5 sessions, 4 running, 1 waiting-for-input\n\nID ") || strings.Contains(s, "o1") {
			t.Errorf("snapshot without the live sessions' summary and table:\n%s", s)
		}
	}
}
