package conformance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

type exitCase struct {
	name string
	// argv gets the fixture; nil policy means the default.
	argv    func(f *fixture) []string
	timeout time.Duration
	want    int
}

// wantHere is the exit code on this OS: macOS refuses limits.timeout (it
// cannot find every process of a sandbox to end it), and a refusal is 125.
func (c exitCase) wantHere() int {
	if c.timeout > 0 && runtime.GOOS == "darwin" {
		return 125
	}
	return c.want
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
	outcomeHere(t)
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			for _, c := range exitCases() {
				t.Run(c.name, func(t *testing.T) {
					f := newFixture(t)
					begin := time.Now()
					s := run(t, commandStart(path == "pty", c.policy(), nil, c.argv(f)...), nil)
					if got := s.exitCode(); got != c.wantHere() {
						t.Errorf("exit code %d, want %d (err %v, exit %v)\n%s", got, c.wantHere(), s.err, s.exit(), s)
					}
					if c.timeout > 0 && c.wantHere() == c.want {
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
	outcomeHere(t)
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
					if r.code != c.wantHere() {
						t.Errorf("sandboxctl %s: exit code %d, want %d\nstdout: %q\nstderr: %q", strings.Join(args, " "), r.code, c.wantHere(), r.stdout, r.stderr)
					}
				})
			}
		})
	}
}

// TestSandboxctlArgumentNotUTF8: an argument that is not UTF-8 reaches
// the daemon, which refuses the session naming that argument (exit 125),
// rather than sandboxctl failing to encode its request and waiting for a
// session that was never asked for.
func TestSandboxctlArgumentNotUTF8(t *testing.T) {
	outcomeHere(t)
	f := newFixture(t)
	for _, path := range [][]string{{"run"}, {"run", "--tty"}} {
		r := sandboxctl(t, f.dir, append(path, "--", "echo", "a\xffb")...)
		if r.code != client.ExitDaemonFailed || !strings.Contains(r.stderr, "command.argv[1]") {
			t.Errorf("sandboxctl %s -- echo a\\xffb: exit %d, stderr %q; want %d and command.argv[1] named", strings.Join(path, " "), r.code, r.stderr, client.ExitDaemonFailed)
		}
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
	return sandboxctlAs(t, nil, socket, dir, args...)
}

// sandboxctlAs is sandboxctlOn with attr's credentials (nil: the test's).
func sandboxctlAs(t *testing.T, attr *syscall.SysProcAttr, socket, dir string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.sandboxctl, append([]string{"--socket", socket}, args...)...)
	cmd.SysProcAttr = attr
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

// TestSandboxctlLimits: sandboxctl run's flags for limits and the
// allowlist (--pids, --memory, --cpus, --output-limit, --allow-host) reach
// the policy and are enforced, as a shell sees it: exit codes, output and
// what stderr says.
func TestSandboxctlLimits(t *testing.T) {
	outcomeHere(t)
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			var tty []string
			if path == "pty" {
				tty = []string{"--tty"}
			}
			// ctl runs sandboxctl run with tty and args; done says the
			// case ends there, at a refusal this host must give (macOS:
			// darwin; the landlock set: landlock) or may give (cgroup,
			// with noCgroupEnv; anything, on a degraded host).
			type refusals struct{ darwin, landlock, cgroup string }
			ctl := func(t *testing.T, may refusals, args ...string) (cliResult, bool) {
				t.Helper()
				f := newFixture(t)
				r := sandboxctl(t, f.dir, append(append([]string{"run"}, tty...), args...)...)
				refusedWith := func(field string) bool {
					return field != "" && r.code == client.ExitDaemonFailed && strings.Contains(r.stderr, field)
				}
				switch {
				case runtime.GOOS == "darwin" && may.darwin != "":
					refused(t, r, "", may.darwin)
					return r, true
				case suite.mechanism == "landlock" && may.landlock != "":
					refused(t, r, "", may.landlock)
					return r, true
				case suite.noCgroup && refusedWith(may.cgroup):
					t.Logf("refused, as %s allows: %s", noCgroupEnv, r.stderr)
					return r, true
				case refusalsAllowed() && suite.mechanism != "landlock" && r.code == client.ExitDaemonFailed &&
					!refusedWith(may.cgroup) && strings.Contains(r.stderr, "refused"):
					t.Logf("refused, as this host allows: %s", r.stderr)
					return r, true
				}
				return r, false
			}
			outcomes := func(t *testing.T, r cliResult, n int) []outcome {
				t.Helper()
				o := parseOutcomes(r.stdout)
				if r.code != 0 || len(o) != n {
					t.Fatalf("exit code %d, %d outcomes; want 0 and %d\nstdout: %q\nstderr: %q", r.code, len(o), n, r.stdout, r.stderr)
				}
				return o
			}
			t.Run("--pids contains a fork bomb", func(t *testing.T) {
				r, done := ctl(t, refusals{darwin: "limits.pids", cgroup: "limits.pids"}, "--pids", "64", "--", suite.probe, "fork-bomb", "1")
				if !done {
					checkForkBomb(t, outcomes(t, r, 1)[0], 32, 64)
				}
			})
			t.Run("--memory kills a hog with 137 and says why", func(t *testing.T) {
				r, done := ctl(t, refusals{darwin: "limits.memory_bytes", cgroup: "limits.memory_bytes"}, "--memory", "64M", "--", suite.probe, "mem-hog", "200000000")
				if !done && (r.code != 128+9 || !strings.Contains(r.stderr, "limits.memory_bytes")) {
					t.Errorf("exit code %d, stderr %q; want %d and the limit named", r.code, r.stderr, 128+9)
				}
			})
			t.Run("--cpus throttles a spin", func(t *testing.T) {
				r, done := ctl(t, refusals{darwin: "limits.cpu_millis", cgroup: "limits.cpu_millis"}, "--cpus", "0.2", "--", suite.probe, "cpu-burn", "1500ms")
				if done {
					return
				}
				d := detailMap(outcomes(t, r, 1)[0])
				cpu, _ := d["cpu_seconds"].(float64)
				wall, _ := d["wall_seconds"].(float64)
				if wall < 1.4 || cpu/wall > maxCPURatio {
					t.Errorf("under --cpus 0.2 a spin got %.2f CPU seconds in %.2f wall seconds; want at most %.2f per second", cpu, wall, maxCPURatio)
				}
			})
			t.Run("--output-limit truncates with a marker", func(t *testing.T) {
				r, _ := ctl(t, refusals{}, "--output-limit", "1000", "--", suite.probe, "spew", "5000")
				out := strings.ReplaceAll(r.stdout+r.stderr, "\r\n", "\n")
				if want := strings.Repeat("x", 1000) + truncationMarker(1000); r.code != 0 || out != want {
					t.Errorf("exit code %d, output %q; want 0 and %q", r.code, out, want)
				}
			})
			t.Run("--allow-host admits that host alone", func(t *testing.T) {
				o := newOrigin(t)
				r, done := ctl(t, refusals{darwin: "network.allow", landlock: "network.mode"}, "--allow-host", o.at(allowedName), "--",
					suite.probe, "http-get", o.url(allowedName), "http-get", o.url(otherName))
				if done {
					return
				}
				got := outcomes(t, r, 2)
				reachedOrigin(t, proxyStep{op: "http-get", target: o.at(allowedName), token: o.token}, got[0])
				deniedByProxy(t, proxyStep{op: "http-get", target: o.at(otherName)}, got[1])
			})
			t.Run("--allow-host pattern without a port admits names below it, any port", func(t *testing.T) {
				o := newOrigin(t)
				r, done := ctl(t, refusals{darwin: "network.allow", landlock: "network.mode"}, "--allow-host", "*."+wildApex, "--",
					suite.probe, "proxy-connect", o.at(wildSub), "proxy-connect", o.at(wildApex))
				if done {
					return
				}
				got := outcomes(t, r, 2)
				reachedOrigin(t, proxyStep{op: "proxy-connect", target: o.at(wildSub), token: o.token}, got[0])
				deniedByProxy(t, proxyStep{op: "proxy-connect", target: o.at(wildApex)}, got[1])
			})
		})
	}
}
