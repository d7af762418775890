package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/testsock"
)

type sessionStream = grpc.BidiStreamingServer[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]

// fakeDaemon runs the session a test scripts and answers the operator calls
// from a fixed session table: sessions, or else fakeSession alone.
type fakeDaemon struct {
	sandboxdv1grpc.UnimplementedSandboxdServer
	session  func(sessionStream) error
	killed   chan *sandboxdv1.KillRequest
	caps     *sandboxdv1.CapabilitiesReport
	sessions []*sandboxdv1.SessionInfo
}

var fakeSession = &sandboxdv1.SessionInfo{
	Id:      "a1b2",
	State:   sandboxdv1.State_WAITING_FOR_INPUT,
	Argv:    []string{"python3", "-i"},
	Pid:     4242,
	Viewers: 1,
	Created: timestamppb.New(time.Now().Add(-90 * time.Second)),
	Policy:  &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}},
}

func (d *fakeDaemon) Session(s sessionStream) error { return d.session(s) }

func (d *fakeDaemon) table() []*sandboxdv1.SessionInfo {
	if d.sessions != nil {
		return d.sessions
	}
	return []*sandboxdv1.SessionInfo{fakeSession}
}

func (d *fakeDaemon) List(context.Context, *sandboxdv1.ListRequest) (*sandboxdv1.ListResponse, error) {
	return &sandboxdv1.ListResponse{Sessions: d.table()}, nil
}

func (d *fakeDaemon) Inspect(_ context.Context, req *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
	for _, s := range d.table() {
		if s.GetId() == req.GetId() {
			return s, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no session %q", req.GetId())
}

func (d *fakeDaemon) Kill(_ context.Context, req *sandboxdv1.KillRequest) (*sandboxdv1.KillResponse, error) {
	d.killed <- req
	return &sandboxdv1.KillResponse{}, nil
}

func (d *fakeDaemon) Capabilities(context.Context, *sandboxdv1.CapabilitiesRequest) (*sandboxdv1.CapabilitiesReport, error) {
	return d.caps, nil
}

func startDaemon(t *testing.T, d *fakeDaemon) string {
	t.Helper()
	ln, sock := testsock.Listen(t)
	gs := grpc.NewServer()
	sandboxdv1grpc.RegisterSandboxdServer(gs, d)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return sock
}

// sandboxctl runs the CLI in-process with stdin from a file holding input.
func sandboxctl(t *testing.T, input string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(in, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out, errOut bytes.Buffer
	c := &cli{stdin: f, stdout: &out, stderr: &errOut}
	code = c.main(context.Background(), args)
	return code, out.String(), errOut.String()
}

func TestRunStreamsAndExitsWithTheCommandsCode(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{session: func(s sessionStream) error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		argv := req.GetStart().GetCommand().GetArgv()
		if !req.GetStart().GetOmitEnforcement() {
			return status.Error(codes.InvalidArgument, "run asks for the enforcement report it does not print")
		}
		if err := s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: "r1"}}}); err != nil {
			return err
		}
		var in []byte
		for {
			req, err := s.Recv()
			if err != nil {
				return err
			}
			in = append(in, req.GetStdin().GetData()...)
			if req.GetStdin().GetEof() {
				break
			}
		}
		for _, o := range []*sandboxdv1.Output{
			{Stream: sandboxdv1.Output_STDOUT, Data: []byte(strings.Join(argv, " ") + ": " + string(in))},
			{Stream: sandboxdv1.Output_STDERR, Data: []byte("warning\n")},
		} {
			if err := s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: o}}); err != nil {
				return err
			}
		}
		return s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: &sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 7}}})
	}})
	code, stdout, stderr := sandboxctl(t, "input\n", "--socket", sock, "run", "--", "wc", "-l")
	if code != 7 || stdout != "wc -l: input\n" || stderr != "warning\n" {
		t.Errorf("code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestRunRefusalPrintsReasonAndExits125(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{session: func(s sessionStream) error {
		st, err := status.New(codes.FailedPrecondition, "cannot enforce network.mode").WithDetails(&sandboxdv1.Unenforceable{
			Field: "network.mode", Mechanism: "network namespace", Remedy: "run the daemon as root",
		})
		if err != nil {
			return err
		}
		return st.Err()
	}})
	code, _, stderr := sandboxctl(t, "", "--socket", sock, "run", "--network", "none", "--", "true")
	want := "sandboxctl: refused: cannot enforce network.mode\n  needs: network namespace\n  remedy: run the daemon as root\n"
	if code != 125 || stderr != want {
		t.Errorf("code %d, stderr %q; want 125, %q", code, stderr, want)
	}
}

func TestRunOtherDaemonErrorsPrintOneLine(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{session: func(s sessionStream) error {
		return status.Error(codes.InvalidArgument, "command.argv: too long")
	}})
	code, _, stderr := sandboxctl(t, "", "--socket", sock, "run", "--", "true")
	if code != 125 || stderr != "sandboxctl: start session: command.argv: too long\n" {
		t.Errorf("code %d, stderr %q", code, stderr)
	}
}

func TestRunCommandNotFound(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{session: func(s sessionStream) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		return s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: &sandboxdv1.Exit{
			State: sandboxdv1.State_FAILED_TO_START, ExitCode: 127, Reason: "exec nope: no such file or directory",
		}}})
	}})
	code, _, stderr := sandboxctl(t, "", "--socket", sock, "run", "--", "nope")
	if code != 127 || stderr != "sandboxctl: failed to start: exec nope: no such file or directory\n" {
		t.Errorf("code %d, stderr %q", code, stderr)
	}
}

// TestRunErrorsBeforeTheCommand: a command line sandboxctl cannot make
// sense of exits 2, as on every verb; a policy it refuses on the daemon's
// behalf, and a daemon it cannot reach, exit 125, as the daemon's refusal.
func TestRunErrorsBeforeTheCommand(t *testing.T) {
	missing := testsock.Missing(t)
	misspelt := writePolicy(t, `{"filesystem": {"denny": ["/etc"]}}`)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing command", []string{"--socket", missing, "run"}, 2, "sandboxctl run: missing command\nRun 'sandboxctl run --help' for usage.\n"},
		{"bad size", []string{"--socket", missing, "run", "--memory", "lots", "--", "true"}, 2, `sandboxctl run: --memory "lots": not a size`},
		{"bad host pattern", []string{"--socket", missing, "run", "--allow-host", "*.org", "--", "true"}, 2, `sandboxctl run: --allow-host "*.org": host "*.org"`},
		{"allowlist without hosts", []string{"--socket", missing, "run", "--network", "allowlist", "--", "true"}, 2, "sandboxctl run: --network allowlist needs at least one --allow-host\n"},
		{"unknown verb", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"no verb", nil, 2, "usage: sandboxctl"},
		{"no daemon", []string{"--socket", missing, "run", "--", "true"}, 125, "no sandboxd listening on " + missing},
		{"policy file refused", []string{"--socket", missing, "run", "--policy", misspelt, "--", "true"}, 125, "sandboxctl run: --policy " + misspelt + ": "},
		{"policy refused", []string{"--socket", missing, "run", "--read-only", "/etc", "--", "true"}, 125, "filesystem.read_only[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := sandboxctl(t, "", tc.args...)
			if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("code %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, tc.code, tc.stderr)
			}
		})
	}
}

// TestOtherGRPCServerIsNotSandboxd: a gRPC server on the socket that is
// not sandboxd is named as such, by run (exit 125, --json too) and the
// operator verbs (exit 1).
func TestOtherGRPCServerIsNotSandboxd(t *testing.T) {
	ln, sock := testsock.Listen(t)
	gs := grpc.NewServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	want := sock + " is a gRPC server but not sandboxd"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"run", "--", "true"}, 125},
		{[]string{"run", "--detach", "--", "true"}, 125},
		{[]string{"run", "--json", "--", "true"}, 125},
		{[]string{"ps"}, 1},
		{[]string{"inspect", "s1"}, 1},
		{[]string{"kill", "s1"}, 1},
		{[]string{"layers"}, 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := sandboxctl(t, "", append([]string{"--socket", sock}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, want) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, stderr, tc.code, want)
			}
			if slices.Contains(tc.args, "--json") && !strings.Contains(stdout, want) {
				t.Errorf("--json stdout %q does not say %q", stdout, want)
			}
		})
	}
}

func TestSocketFromEnvironment(t *testing.T) {
	missing := testsock.Missing(t)
	t.Setenv("SANDBOXD_SOCKET", missing)
	_, _, stderr := sandboxctl(t, "", "ps")
	if !strings.Contains(stderr, missing) {
		t.Errorf("stderr %q does not name $SANDBOXD_SOCKET", stderr)
	}
}

func TestHelpListsVerbs(t *testing.T) {
	var out bytes.Buffer
	c := &cli{stdin: os.Stdin, stdout: &out, stderr: &out}
	if code := c.main(context.Background(), []string{"--help"}); code != 0 {
		t.Errorf("code %d", code)
	}
	for _, v := range []string{"run", "attach", "ps", "inspect", "kill", "doctor", "--socket"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %q:\n%s", v, out.String())
		}
	}
}

func TestPs(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{})
	code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "ps")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "ID STATE PID AGE DENIALS VIEWERS PARENT COMMAND" {
		t.Errorf("header %q", lines[0])
	}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != "a1b2 waiting-for-input 4242 1m 0 1 python3 -i" {
		t.Errorf("row %q", lines[1])
	}
	code, stdout, _ = sandboxctl(t, "", "--socket", sock, "ps", "-q")
	if code != 0 || stdout != "a1b2\n" {
		t.Errorf("ps -q: code %d, stdout %q", code, stdout)
	}
}

func TestInspectShowsZeroExitCode(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{})
	code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "inspect", "a1b2")
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	for _, key := range []string{"id", "state", "argv", "policy", "enforcement", "exit_code"} {
		if _, ok := got[key]; !ok {
			t.Errorf("no %q in\n%s", key, stdout)
		}
	}
	if got["exit_code"] != 0.0 || got["state"] != "waiting-for-input" {
		t.Errorf("exit_code %v, state %v", got["exit_code"], got["state"])
	}

	code, _, stderr = sandboxctl(t, "", "--socket", sock, "inspect", "zzz")
	if code != 1 || stderr != "sandboxctl: inspect zzz: no session \"zzz\"\n" {
		t.Errorf("inspect zzz: code %d, stderr %q", code, stderr)
	}
}

func TestKill(t *testing.T) {
	d := &fakeDaemon{killed: make(chan *sandboxdv1.KillRequest, 1)}
	sock := startDaemon(t, d)
	for _, tc := range []struct {
		args []string
		want int32
	}{
		{[]string{"a1b2"}, 0},
		{[]string{"--signal", "TERM", "a1b2"}, 15},
		{[]string{"--signal", "2", "a1b2"}, 2},
	} {
		code, _, stderr := sandboxctl(t, "", append([]string{"--socket", sock, "kill"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("kill %q: code %d, stderr %q", tc.args, code, stderr)
		}
		if req := <-d.killed; req.GetId() != "a1b2" || req.GetSignal() != tc.want {
			t.Errorf("kill %q sent %v", tc.args, req)
		}
	}
	if code, _, _ := sandboxctl(t, "", "--socket", sock, "kill", "--signal", "BOGUS", "a1b2"); code != exitUsage {
		t.Errorf("bad signal: code %d", code)
	}
}

func capsReport(st *sandboxdv1.SelfTest) *sandboxdv1.CapabilitiesReport {
	return &sandboxdv1.CapabilitiesReport{
		Backend: "linux",
		Host:    &sandboxdv1.HostFacts{Os: "linux", Kernel: "6.8.0", Root: true, LandlockAbi: 4},
		Probes: []*sandboxdv1.ProbeResult{
			{Name: "user namespace", Ok: true, Operation: "clone(CLONE_NEWUSER)"},
			{Name: "network namespace", Operation: "unshare(CLONE_NEWNET)", Errno: "EPERM (operation not permitted)"},
		},
		MechanismSets: []*sandboxdv1.MechanismSet{
			{Name: "namespaces", Missing: []string{"network namespace: unshare(CLONE_NEWNET): EPERM"}},
			{Name: "landlock", Available: true},
		},
		Features: []*sandboxdv1.FeatureSupport{
			{Feature: "network.mode=NONE", Enforceable: true, MechanismSet: "landlock",
				Enforcement: []*sandboxdv1.FieldEnforcement{{Field: "network.mode", Mechanism: "landlock abi 4 + seccomp"}}},
			{Feature: "filesystem.read=LISTED", Refusal: &sandboxdv1.Unenforceable{
				Field: "filesystem.read", Mechanism: "mount namespace", Remedy: "allow user namespaces"}},
		},
		SelfTest: st,
	}
}

func TestDoctor(t *testing.T) {
	passed := &sandboxdv1.SelfTest{Passed: true, MechanismSet: "landlock", Checks: []*sandboxdv1.SelfTestCheck{
		{Name: "read-deny", Ok: true, Detail: "denied: permission denied"},
	}}
	failed := &sandboxdv1.SelfTest{MechanismSet: "landlock", Checks: []*sandboxdv1.SelfTestCheck{
		{Name: "read-deny", Detail: "NOT denied"},
	}}
	pending := &sandboxdv1.SelfTest{Checks: []*sandboxdv1.SelfTestCheck{{Name: "pending", Detail: "the self-test is still running"}}}
	for _, tc := range []struct {
		name string
		st   *sandboxdv1.SelfTest
		code int
		want []string
	}{
		{"passed", passed, 0, []string{"self-test: passed (mechanism set landlock)", "ok   read-deny: denied"}},
		{"failed", failed, 1, []string{"self-test: FAILED (mechanism set landlock)", "FAIL read-deny: NOT denied"}},
		{"pending", pending, 1, []string{"self-test: pending"}},
		{"not run", nil, 1, []string{"self-test: not run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := startDaemon(t, &fakeDaemon{caps: capsReport(tc.st)})
			code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "doctor")
			if code != tc.code || stderr != "" {
				t.Errorf("code %d, stderr %q; want %d", code, stderr, tc.code)
			}
			for _, want := range append(tc.want,
				"FAIL network namespace: unshare(CLONE_NEWNET): EPERM",
				"  network.mode=NONE: enforceable yes, by landlock\n    network.mode: landlock abi 4 + seccomp\n",
				"  filesystem.read=LISTED: enforceable no\n    field: filesystem.read\n    needs: mount namespace\n    remedy: allow user namespaces\n",
			) {
				if !strings.Contains(stdout, want) {
					t.Errorf("no %q in\n%s", want, stdout)
				}
			}
		})
	}
}

func TestDoctorJSON(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{caps: capsReport(&sandboxdv1.SelfTest{Passed: true})})
	code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "doctor", "--json")
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	var got struct {
		Backend       string `json:"backend"`
		MechanismSets []struct {
			Name      string `json:"name"`
			Available *bool  `json:"available"`
		} `json:"mechanism_sets"`
		Forced   *string `json:"forced_mechanism_set"`
		SelfTest struct {
			Passed bool `json:"passed"`
		} `json:"self_test"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if got.Backend != "linux" || !got.SelfTest.Passed || got.Forced == nil || len(got.MechanismSets) != 2 ||
		got.MechanismSets[0].Available == nil || *got.MechanismSets[0].Available {
		t.Errorf("decoded %+v from\n%s", got, stdout)
	}
	if !strings.Contains(stdout, "\n  \"") {
		t.Errorf("not multiline:\n%s", stdout)
	}

	sock = startDaemon(t, &fakeDaemon{caps: capsReport(nil)})
	code, stdout, _ = sandboxctl(t, "", "--socket", sock, "doctor", "--json")
	var notRun map[string]any
	if err := json.Unmarshal([]byte(stdout), &notRun); code != 1 || err != nil || notRun["backend"] != "linux" || notRun["self_test"] != nil {
		t.Errorf("self-test not run: code %d, %v, stdout %q", code, err, stdout)
	}
}

func TestDoctorErrors(t *testing.T) {
	missing := testsock.Missing(t)
	code, _, stderr := sandboxctl(t, "", "--socket", missing, "doctor")
	if code != 1 || !strings.Contains(stderr, "no sandboxd listening on "+missing) {
		t.Errorf("no daemon: code %d, stderr %q", code, stderr)
	}
	if code, _, _ := sandboxctl(t, "", "doctor", "extra"); code != exitUsage {
		t.Errorf("extra argument: code %d", code)
	}
	if code, stdout, _ := sandboxctl(t, "", "doctor", "--help"); code != 0 || !strings.Contains(stdout, "usage: sandboxctl doctor [--json]") {
		t.Errorf("--help: code %d, stdout %q", code, stdout)
	}
}

func TestRunDetachPrintsOnlyTheID(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			sock := startDaemon(t, &fakeDaemon{session: func(s sessionStream) error {
				req, err := s.Recv()
				if err != nil {
					return err
				}
				// stdin is a file here, not a terminal: no window to lend.
				if st := req.GetStart(); !st.GetDetach() || st.GetTty() != tty || st.GetWindow() != nil || !st.GetOmitEnforcement() {
					return fmt.Errorf("start %v", st)
				}
				return s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: "d9"}}})
			}})
			args := []string{"--socket", sock, "run", "--detach"}
			if tty {
				args = append(args, "--tty")
			}
			code, stdout, stderr := sandboxctl(t, "not for the session\n", append(args, "--", "sleep", "100")...)
			if code != 0 || stdout != "d9\n" || stderr != "" {
				t.Errorf("code %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}

func TestRunDetachFailuresExitAsRunDoes(t *testing.T) {
	refusal := func(s sessionStream) error {
		st, err := status.New(codes.FailedPrecondition, "cannot enforce network.mode").WithDetails(&sandboxdv1.Unenforceable{
			Field: "network.mode", Mechanism: "network namespace", Remedy: "run the daemon as root",
		})
		if err != nil {
			return err
		}
		return st.Err()
	}
	notFound := func(s sessionStream) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		return s.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: &sandboxdv1.Exit{
			State: sandboxdv1.State_FAILED_TO_START, ExitCode: 127, Reason: "exec nope: no such file or directory",
		}}})
	}
	for _, tc := range []struct {
		name    string
		session func(sessionStream) error
		code    int
		stderr  string
	}{
		{"refused", refusal, 125, "sandboxctl: refused: cannot enforce network.mode\n  needs: network namespace\n  remedy: run the daemon as root\n"},
		{"not found", notFound, 127, "sandboxctl: failed to start: exec nope: no such file or directory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := startDaemon(t, &fakeDaemon{session: tc.session})
			code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "run", "--detach", "--", "nope")
			if code != tc.code || stdout != "" || stderr != tc.stderr {
				t.Errorf("code %d, stdout %q, stderr %q; want %d, %q", code, stdout, stderr, tc.code, tc.stderr)
			}
		})
	}
}

// TestRunWideningAChildPolicy is run inside a sandbox, on its own socket,
// asking for more than the sandbox has.
func TestRunWideningAChildPolicy(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{session: func(s sessionStream) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		return status.Error(codes.PermissionDenied, "child policy: network.mode: HOST, but the parent allows only NONE")
	}})
	t.Setenv("SANDBOXD_SOCKET", sock)
	for _, detach := range []bool{false, true} {
		args := []string{"run", "--network", "host"}
		if detach {
			args = append(args, "--detach")
		}
		code, stdout, stderr := sandboxctl(t, "", append(args, "--", "curl", "example.com")...)
		if code != 125 || stdout != "" || stderr != "sandboxctl: start session: child policy: network.mode: HOST, but the parent allows only NONE\n" {
			t.Errorf("detach %v: code %d, stdout %q, stderr %q", detach, code, stdout, stderr)
		}
	}
}
