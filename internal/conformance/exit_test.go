//go:build linux || darwin

package conformance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

type exitCase struct {
	name string
	// argv gets the fixture; nil policy means the default.
	argv    func(f *fixture) []string
	timeout time.Duration
	want    int
}

func exitCases() []exitCase {
	return []exitCase{
		{name: "exit 3 is 3", want: 3, argv: func(*fixture) []string {
			return []string{"/bin/sh", "-c", "exit 3"}
		}},
		{name: "missing path is 127", want: 127, argv: func(f *fixture) []string {
			return []string{f.path("no-such-command")}
		}},
		{name: "command not on PATH is 127", want: 127, argv: func(*fixture) []string {
			return []string{"sandboxd-conformance-no-such-command"}
		}},
		{name: "file without exec permission is 126", want: 126, argv: func(f *fixture) []string {
			return []string{f.file("not-executable", "#!/bin/sh\nexit 0\n")}
		}},
		{name: "directory is 126", want: 126, argv: func(f *fixture) []string {
			return []string{f.mkdir("a-directory")}
		}},
		{name: "killed by SIGTERM is 143", want: 128 + 15, argv: func(*fixture) []string {
			return []string{"/bin/sh", "-c", "kill -TERM $$"}
		}},
		{name: "timeout kills with 137", want: 128 + 9, timeout: time.Second, argv: func(*fixture) []string {
			return []string{suite.probe, "hold", "timeout-" + randomHex()}
		}},
	}
}

func (c exitCase) policy() *sandboxdv1.Policy {
	if c.timeout == 0 {
		return nil
	}
	return &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(c.timeout)}}
}

// TestExitCodes checks the exit code mapping through the client library on
// both paths.
func TestExitCodes(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			for _, c := range exitCases() {
				t.Run(c.name, func(t *testing.T) {
					f := newFixture(t)
					begin := time.Now()
					s := run(t, commandStart(path == "pty", c.policy(), nil, c.argv(f)...), nil)
					if got := s.exitCode(); got != c.want {
						t.Errorf("exit code %d, want %d (err %v, exit %v)\n%s", got, c.want, s.err, s.exit(), s)
					}
					if c.timeout > 0 {
						checkTimedOut(t, s, time.Since(begin), c.timeout)
					}
				})
			}
		})
	}
}

func checkTimedOut(t *testing.T, s *session, took, limit time.Duration) {
	t.Helper()
	if took > limit+10*time.Second {
		t.Errorf("session with a %v timeout took %v", limit, took)
	}
	if e := s.exit(); e.GetState() != sandboxdv1.State_KILLED || !strings.Contains(strings.ToLower(e.GetReason()), "timeout") {
		t.Errorf("timed-out session ended %v with reason %q, want KILLED by timeout", e.GetState(), e.GetReason())
	}
}

// TestSandboxctlExitCodes checks the same mapping as a shell sees it, from
// sandboxctl's own exit status.
func TestSandboxctlExitCodes(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			for _, c := range exitCases() {
				t.Run(c.name, func(t *testing.T) {
					f := newFixture(t)
					args := []string{"run"}
					if path == "pty" {
						args = append(args, "--tty")
					}
					if c.timeout > 0 {
						args = append(args, "--timeout", c.timeout.String())
					}
					args = append(args, "--")
					args = append(args, c.argv(f)...)
					r := sandboxctl(t, f.dir, args...)
					if r.code != c.want {
						t.Errorf("sandboxctl %s: exit code %d, want %d\nstdout: %q\nstderr: %q", strings.Join(args, " "), r.code, c.want, r.stdout, r.stderr)
					}
				})
			}
		})
	}
}

type cliResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// sandboxctl runs the CLI against the suite's daemon in dir, with stdin
// from /dev/null.
func sandboxctl(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	requireDaemon(t)
	return sandboxctlOn(t, suite.daemon.socket, dir, args...)
}

func sandboxctlOn(t *testing.T, socket, dir string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.sandboxctl, append([]string{"--socket", socket}, args...)...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err := cmd.Run()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(begin)}
	if ctx.Err() != nil {
		t.Fatalf("sandboxctl %s did not finish within %v\nstderr: %q", strings.Join(args, " "), sessionTimeout, r.stderr)
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else {
			t.Fatalf("sandboxctl: %v", err)
		}
	}
	return r
}
