package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// refused checks that sandboxctl failed as the daemon's or its own refusal
// (125), saying something that contains each of mention, and that the
// command never ran.
func refused(t *testing.T, r cliResult, ran string, mention ...string) {
	t.Helper()
	if r.code != client.ExitDaemonFailed {
		t.Errorf("exit code %d, want %d\nstdout: %q\nstderr: %q", r.code, client.ExitDaemonFailed, r.stdout, r.stderr)
	}
	for _, m := range mention {
		if !strings.Contains(r.stderr, m) {
			t.Errorf("stderr does not mention %q: %q", m, r.stderr)
		}
	}
	if ran != "" {
		absent(t, ran)
	}
}

func TestSandboxctlBadInput(t *testing.T) {
	outcomeHere(t)
	t.Run("policy file's relative path is the caller's working directory's", func(t *testing.T) {
		f := newFixture(t)
		f.mkdir("relative/dir")
		pol := f.file("policy.json", `{"filesystem":{"write":["relative/dir"]}}`)
		inside, outside := f.path("relative/dir/ran"), f.path("ran")
		r := sandboxctl(t, f.dir, "run", "--policy", pol, "--", suite.probe, "write", inside, "write", outside)
		if r.code != 0 || strings.Count(r.stdout, `"op":"write","ok":true`) != 1 {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 0, the write inside relative/dir alone allowed", r.code, r.stdout, r.stderr)
		}
		unchanged(t, inside, payload)
		absent(t, outside)
	})
	t.Run("policy file with an unknown field is refused", func(t *testing.T) {
		f := newFixture(t)
		pol := f.file("policy.json", `{"filesystem":{"write":["`+f.dir+`"]},"bogus":true}`)
		ran := f.path("ran")
		r := sandboxctl(t, f.dir, "run", "--policy", pol, "--", suite.probe, "write", ran)
		refused(t, r, ran, "bogus")
	})
	t.Run("missing command is a usage error", func(t *testing.T) {
		f := newFixture(t)
		for _, args := range [][]string{{"run"}, {"run", "--write", f.dir, "--"}} {
			if r := sandboxctl(t, f.dir, args...); r.code != 2 || !strings.Contains(r.stderr, "missing command") {
				t.Errorf("sandboxctl %q: exit %d, stderr %q; want 2 and missing command", args, r.code, r.stderr)
			}
		}
	})
	t.Run("huge argv is refused with a reason", func(t *testing.T) {
		f := newFixture(t)
		ran := f.path("ran")
		args := []string{"run", "--write", f.dir, "--", suite.probe, "write", ran, "argc"}
		args = append(args, hugeArgv()...)
		refused(t, sandboxctl(t, f.dir, args...), ran, "argv")
	})
	t.Run("large argv within limits reaches the command", func(t *testing.T) {
		f := newFixture(t)
		args := append([]string{"run", "--", suite.probe, "argc"}, manyArgs(2000, 256)...)
		r := sandboxctl(t, f.dir, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "2000 args, 512000 bytes") {
			t.Errorf("exit code %d, stdout %q, stderr %q; want the probe to count 2000 args, 512000 bytes", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("relative --write is resolved against the current directory", func(t *testing.T) {
		f := newFixture(t)
		f.mkdir("rel")
		r := sandboxctl(t, f.dir, "run", "--write", "rel", "--", suite.probe, "write", "rel/file")
		if r.code != 0 || len(parseOutcomes(r.stdout)) != 1 || !parseOutcomes(r.stdout)[0].OK {
			t.Fatalf("exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		unchanged(t, f.path("rel/file"), payload)
	})
	t.Run("socket that is not a daemon is reported", func(t *testing.T) {
		f := newFixture(t)
		for name, greeting := range map[string]string{
			"answers HTTP": "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
			"stays silent": "",
		} {
			t.Run(name, func(t *testing.T) {
				sock := f.path(strings.ReplaceAll(name, " ", "-") + ".sock")
				fakeServer(t, sock, greeting)
				r := sandboxctlOn(t, sock, f.dir, "run", "--", trueCmd)
				refused(t, r, "", sock)
				if r.took > 15*time.Second {
					t.Errorf("took %v to give up on a socket that is not sandboxd", r.took)
				}
			})
		}
	})
	t.Run("socket that does not exist is reported", func(t *testing.T) {
		f := newFixture(t)
		sock := f.path("nothing.sock")
		refused(t, sandboxctlOn(t, sock, f.dir, "run", "--", trueCmd), "", sock)
	})
}

func manyArgs(n, size int) []string {
	arg := strings.Repeat("a", size)
	out := make([]string, n)
	for i := range out {
		out[i] = arg
	}
	return out
}

// fakeServer accepts on a unix socket, sends greeting (if any) and keeps the
// connection open without speaking gRPC.
func fakeServer(t *testing.T, path, greeting string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
			if greeting != "" {
				_, _ = c.Write([]byte(greeting))
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
}

// TestDaemonRejectsBadRequests sends what sandboxctl would refuse itself
// straight to the daemon, which must refuse it too, say why, run nothing,
// and keep serving.
func TestDaemonRejectsBadRequests(t *testing.T) {
	outcomeHere(t)
	for _, c := range []struct {
		name    string
		start   func(f *fixture, ran string) *sandboxdv1.Start
		code    codes.Code
		mention string
	}{
		{"relative write root", func(f *fixture, ran string) *sandboxdv1.Start {
			return probeStart(false, fsPolicy(list(f.dir, "relative/dir"), nil, nil), nil, "write", ran)
		}, codes.InvalidArgument, "relative/dir"},
		{"relative read-only carve-out", func(f *fixture, ran string) *sandboxdv1.Start {
			return probeStart(false, fsPolicy(list(f.dir), list("relative/.git"), nil), nil, "write", ran)
		}, codes.InvalidArgument, "relative/.git"},
		{"relative deny path", func(f *fixture, ran string) *sandboxdv1.Start {
			return probeStart(false, fsPolicy(list(f.dir), nil, list("relative/secret")), nil, "write", ran)
		}, codes.InvalidArgument, "relative/secret"},
		{"relative cwd", func(f *fixture, ran string) *sandboxdv1.Start {
			st := probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran)
			st.Command.Cwd = "relative/cwd"
			return st
		}, codes.InvalidArgument, "relative/cwd"},
		{"missing command", func(f *fixture, ran string) *sandboxdv1.Start {
			return commandStart(false, nil, nil)
		}, codes.InvalidArgument, "command"},
		{"huge argv", func(f *fixture, ran string) *sandboxdv1.Start {
			return probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, append([]string{"write", ran, "argc"}, manyArgs(2048, 1024)...)...)
		}, codes.InvalidArgument, "argv"},
		// The daemon quotes the path, which escapes a Windows path's
		// separators.
		{"carve-out outside every write root", func(f *fixture, ran string) *sandboxdv1.Start {
			return probeStart(false, fsPolicy(list(f.path("w")), list(f.path("elsewhere/.git")), nil), nil, "write", ran)
		}, codes.InvalidArgument, strings.Trim(strconv.Quote(filepath.FromSlash("elsewhere/.git")), `"`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireDaemon(t)
			f := newFixture(t)
			ran := f.path("ran")
			s := run(t, c.start(f, ran), nil)
			if s.err == nil {
				t.Fatalf("request was accepted: exit %v\n%s", s.exit(), s)
			}
			st := status.Convert(s.err)
			if st.Code() != c.code || !strings.Contains(st.Message(), c.mention) {
				t.Errorf("got %v %q, want %v mentioning %q", st.Code(), st.Message(), c.code, c.mention)
			}
			if got := s.exitCode(); got != client.ExitDaemonFailed {
				t.Errorf("exit code %d, want %d", got, client.ExitDaemonFailed)
			}
			absent(t, ran)
			stillServing(t)
		})
	}
}

// TestUnenforceableIsRefused: what this backend cannot enforce yet must be
// refused with a structured reason, never run with less confinement. Each
// OS says, in enforcedHere, which of these it enforces instead; the cases
// of cases() show those enforced. limits.output_bytes and limits.timeout
// are not here: the daemon enforces them itself, on every OS.
func TestUnenforceableIsRefused(t *testing.T) {
	outcomeHere(t)
	for _, c := range []struct {
		name string
		// feature is what the capabilities report calls what the policy
		// uses.
		feature string
		policy  func(f *fixture) *sandboxdv1.Policy
	}{
		{"network allowlist", "network.mode=ALLOWLIST", func(f *fixture) *sandboxdv1.Policy {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}}}
			return p
		}},
		{"memory limit", "limits.memory_bytes", func(f *fixture) *sandboxdv1.Policy {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{MemoryBytes: 1 << 30}
			return p
		}},
		{"pids limit", "limits.pids", func(f *fixture) *sandboxdv1.Policy {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{Pids: 100}
			return p
		}},
		{"cpu limit", "limits.cpu_millis", func(f *fixture) *sandboxdv1.Policy {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{CpuMillis: 500}
			return p
		}},
		{"timeout", "limits.timeout", func(f *fixture) *sandboxdv1.Policy {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{Timeout: durationpb.New(time.Minute)}
			return p
		}},
		{"listed read roots", "filesystem.read=LISTED", func(f *fixture) *sandboxdv1.Policy {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Filesystem.Read = sandboxdv1.Filesystem_LISTED
			return p
		}},
	} {
		for _, path := range []string{"exec", "pty"} {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				if why := enforcedHere(c.feature); why != "" {
					t.Skip(why)
				}
				f := newFixture(t)
				ran := f.path("ran")
				s := run(t, probeStart(path == "pty", c.policy(f), nil, "write", ran), nil)
				if s.err == nil {
					t.Fatalf("policy was accepted: exit %v\n%s", s.exit(), s)
				}
				if code := status.Code(s.err); code != codes.FailedPrecondition {
					t.Errorf("got %v (%v), want FailedPrecondition", code, s.err)
				}
				if u := client.UnenforceableFrom(s.err); u == nil || u.GetField() == "" || u.GetRemedy() == "" {
					t.Errorf("refusal carries no Unenforceable with field and remedy: %v (%v)", u, s.err)
				}
				absent(t, ran)
			})
		}
	}
}

func stillServing(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := suite.client.List(ctx); err != nil {
		t.Fatalf("daemon stopped serving: %v", err)
	}
}

// TestDaemonKilledMidSession kills a daemon with SIGKILL while a sandbox is
// running: the client must say so and exit 125 within seconds, and no
// sandboxed process may outlive the daemon.
func TestDaemonKilledMidSession(t *testing.T) {
	outcomeHere(t)
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			d, err := startDaemon(f.path("run"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if !d.dead() {
					d.kill()
				}
			})
			marker := "orphan-" + randomHex()
			probeArgs := []string{"spawn", marker + "-detached", "hold", marker}

			var finished func() (code int, stderr string)
			var out interface{ String() string }
			var ended <-chan struct{}
			if path == "exec" {
				cmd := exec.Command(suite.sandboxctl, append([]string{"--socket", d.socket, "run", "--", suite.probe}, probeArgs...)...)
				cmd.Dir = f.dir
				stdout, stderr := &syncBuffer{}, &syncBuffer{}
				cmd.Stdout, cmd.Stderr = stdout, stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan struct{})
				go func() {
					_ = cmd.Wait()
					close(exited)
				}()
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					<-exited
				})
				out = stdout
				ended = exited
				finished = func() (int, string) {
					select {
					case <-exited:
					case <-time.After(10 * time.Second):
						t.Fatalf("sandboxctl still running 10s after its daemon was killed; stderr %q", stderr.String())
					}
					return cmd.ProcessState.ExitCode(), stderr.String()
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				c, err := client.Dial(ctx, d.socket)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				b := runBackground(t, c, probeStart(true, nil, nil, probeArgs...))
				out = b.out
				ended = b.done
				finished = func() (int, string) {
					b.wait(t, 10*time.Second)
					if !errors.Is(b.err, client.ErrDaemonGone) {
						t.Errorf("client error %v, want one wrapping ErrDaemonGone", b.err)
					}
					return client.ExitCode(b.res, b.err), fmt.Sprint(b.err)
				}
			}

			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(out.String(), marker+`"`) {
				select {
				case <-ended:
					t.Fatalf("session ended before the daemon was killed; output %q; daemon log: %s", out.String(), d.logTail())
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("sandbox never reported holding; output %q; daemon log: %s", out.String(), d.logTail())
				}
			}
			if len(processesWith(marker)) == 0 {
				t.Fatalf("no process with %s on the host before the kill", marker)
			}

			d.kill()
			code, msg := finished()
			if code != client.ExitDaemonFailed {
				t.Errorf("exit code %d after the daemon died, want %d", code, client.ExitDaemonFailed)
			}
			if !strings.Contains(msg, d.socket) {
				t.Errorf("message does not name the daemon's socket %s: %q", d.socket, msg)
			}
			deadline = time.Now().Add(5 * time.Second)
			for {
				pids := processesWith(marker)
				if len(pids) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sandboxed processes %v survived their daemon by 5s", pids)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
