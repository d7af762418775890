package conformance

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/socketpath"
)

type winSpec struct {
	policy *sandboxdv1.Policy
	stdin  string
	steps  []step
	after  func(t *testing.T, out []outcome)
	// killed is the reason the session must end killed for; the steps
	// after the one that provokes it print nothing.
	killed string
	// output, when set, checks the session's raw output instead of the
	// steps' outcomes: for a case whose output the daemon cuts.
	output func(t *testing.T, stdout string)
}

// winCase is a case of the shared list (caseOutcomes) made concrete with
// Windows fixtures: every case the list marks enforced, differing or
// refused on Windows has one, and TestConformance fails for one that
// does not.
type winCase struct {
	name string
	// refuses is the field the backend must refuse the policy for.
	refuses string
	setup   func(f *fixture) winSpec
}

// windowsOnlyMechanisms are the cases only the Windows suite runs: fields
// the Windows backend enforces while Linux and macOS still refuse them
// (limits, issue 9).
// allowlistRefused is every network ALLOWLIST case: Windows has no
// daemon-run proxy to confine a sandbox to, so the policy is refused.
func allowlistRefused(*fixture) winSpec {
	return winSpec{
		policy: &sandboxdv1.Policy{Network: &sandboxdv1.Network{
			Mode:  sandboxdv1.Network_ALLOWLIST,
			Allow: []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}},
		}},
		steps: []step{allow("env")},
	}
}

// protectedDACL gives path the DACL sddl, protected from inheritance.
func protectedDACL(t *testing.T, path, sddl string) {
	t.Helper()
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		t.Fatalf("%s: %v", sddl, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		t.Fatalf("%s: %v", sddl, err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatalf("protect the DACL of %s: %v", path, err)
	}
}

func windowsCases() []winCase {
	return []winCase{
		{name: "can write inside write root", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			f.file("w/existing", "old\n")
			return winSpec{
				policy: fsPolicy(list(w), nil, nil),
				steps: []step{
					allow("write", w+`\new`),
					allow("write", w+`\existing`),
					allow("mkdir", w+`\dir`),
					allow("write", w+`\dir\nested`),
					allow("rename", w+`\new`, w+`\renamed`),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, w+`\existing`, payload)
					unchanged(t, w+`\renamed`, payload)
					unchanged(t, w+`\dir\nested`, payload)
				},
			}
		}},
		{name: "cannot write outside write roots", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			o := f.file("outside/file", "host\n")
			return winSpec{
				policy: fsPolicy(list(w), nil, nil),
				steps: []step{
					deny("write", o),
					deny("write", f.path("outside/new")),
					deny("mkdir", f.path("outside/dir")),
					deny("remove", o),
					deny("rename", o, w+`\stolen`),
					deny("write", f.path("beside-w")),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, o, "host\n")
					absent(t, f.path("outside/new"))
					absent(t, f.path("beside-w"))
				},
			}
		}},
		{name: "cannot write via hardlink to file outside", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			o := f.file("outside/target", "host\n")
			return winSpec{
				policy: fsPolicy(list(w), nil, nil),
				steps:  []step{prepare("link", o, w+`\hardlink`), prepare("write", w+`\hardlink`)},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, o, "host\n")
				},
			}
		}},
		{name: "cannot write existing read-only carve-out", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			cfg := f.file("w/.git/config", "[core]\n")
			return winSpec{
				policy: fsPolicy(list(w), list(w+`\.git`), nil),
				steps: []step{
					deny("write", cfg),
					deny("write", w+`\.git\new`),
					deny("mkdir", w+`\.git\hooks`),
					deny("remove", cfg),
					prepare("link", cfg, w+`\hardlink-to-config`),
					prepare("write", w+`\hardlink-to-config`),
					allow("write", w+`\beside-carve-out`),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, cfg, "[core]\n")
					absent(t, w+`\.git\new`)
				},
			}
		}},
		{name: "cannot create not-yet-existing read-only carve-out", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			return winSpec{
				policy: fsPolicy(list(w), list(w+`\.git`, w+`\.env`), nil),
				steps: []step{
					prepare("mkdir", w+`\.git`),
					deny("write", w+`\.git\config`),
					deny("write", w+`\.env`),
					allow("write", w+`\beside-carve-out`),
				},
				after: func(t *testing.T, _ []outcome) {
					absent(t, w+`\.git\config`)
					// The placeholders are gone once the session is.
					absent(t, w+`\.git`)
					absent(t, w+`\.env`)
				},
			}
		}},
		{name: "cannot rename read-only carve-out", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			cfg := f.file("w/.git/config", "[core]\n")
			return winSpec{
				policy: fsPolicy(list(w), list(w+`\.git`), nil),
				steps: []step{
					deny("rename", w+`\.git`, w+`\moved`),
					prepare("mkdir", w+`\.git`),
					deny("write", w+`\.git\config`),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, cfg, "[core]\n")
					absent(t, w+`\moved\config`)
				},
			}
		}},
		{name: "cannot rename ancestor of carve-out then recreate it", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			cfg := f.file("w/repo/sub/.git/config", "[core]\n")
			return winSpec{
				policy: fsPolicy(list(w), list(w+`\repo\sub\.git`), nil),
				steps: []step{
					deny("rename", w+`\repo`, w+`\moved`),
					deny("rename", w+`\repo\sub`, w+`\repo\moved`),
					prepare("mkdir", w+`\repo`),
					prepare("mkdir", w+`\repo\sub`),
					prepare("mkdir", w+`\repo\sub\.git`),
					deny("write", w+`\repo\sub\.git\config`),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, cfg, "[core]\n")
				},
			}
		}},
		{name: "cannot move deny path in write root out from under its mask", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			secret := f.file("w/config/secrets.json", "{\"token\":\"x\"}\n")
			return winSpec{
				policy: fsPolicy(list(w), nil, list(secret)),
				steps: []step{
					deny("rename", w+`\config`, w+`\moved`),
					deny("read", w+`\moved\secrets.json`),
					deny("read", secret),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, secret, "{\"token\":\"x\"}\n")
				},
			}
		}},
		{name: "cannot read deny path", setup: func(f *fixture) winSpec {
			secret := f.file("data/secret", "password\n")
			dir := f.mkdir("data/secret-dir")
			inner := f.file("data/secret-dir/key", "key\n")
			return winSpec{
				policy: fsPolicy(nil, nil, list(secret, dir)),
				steps: []step{
					deny("read", secret),
					deny("read", inner),
					deny("read", dir),
					allow("read", f.path("data")),
				},
			}
		}},
		{name: "cannot write deny path in write root", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			token := f.file("w/creds/token", "secret\n")
			file := f.file("w/creds.json", "{}\n")
			return winSpec{
				policy: fsPolicy(list(w), nil, list(w+`\creds`, file, w+`\not-yet`)),
				steps: []step{
					deny("write", token),
					deny("read", token),
					deny("write", w+`\creds\new`),
					deny("write", file),
					deny("read", file),
					deny("remove", file),
					deny("rename", w+`\creds`, w+`\moved`),
					deny("write", w+`\not-yet\file`),
					allow("write", w+`\allowed`),
				},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, token, "secret\n")
					unchanged(t, file, "{}\n")
					absent(t, w+`\creds\new`)
					absent(t, w+`\not-yet\file`)
				},
			}
		}},
		{name: "cannot read outside listed read roots", refuses: "filesystem.read", setup: func(f *fixture) winSpec {
			return winSpec{
				policy: &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
					Read:      sandboxdv1.Filesystem_LISTED,
					ReadRoots: list(f.mkdir("r")),
				}},
				steps: []step{allow("env")},
			}
		}},
		{name: "cannot connect TCP to host listener under network none", setup: func(f *fixture) winSpec {
			addr, _ := tcpListener(f.t)
			return winSpec{policy: netPolicy(sandboxdv1.Network_NONE), steps: []step{deny("tcp-connect", addr)}}
		}},
		{name: "can connect TCP to host listener under network host", setup: func(f *fixture) winSpec {
			addr, token := tcpListener(f.t)
			return winSpec{
				policy: netPolicy(sandboxdv1.Network_HOST),
				steps:  []step{allow("tcp-connect", addr)},
				after: func(t *testing.T, out []outcome) {
					if got := out[0].detail(); got != token {
						t.Errorf("host listener's token not received: got %q, want %q", got, token)
					}
				},
			}
		}},
		{name: "cannot reach host UDP listener under network none", setup: func(f *fixture) winSpec {
			addr, _ := udpEcho(f.t)
			return winSpec{policy: netPolicy(sandboxdv1.Network_NONE), steps: []step{deny("udp-send", addr)}}
		}},
		{name: "can reach host UDP listener under network host", setup: func(f *fixture) winSpec {
			addr, token := udpEcho(f.t)
			return winSpec{
				policy: netPolicy(sandboxdv1.Network_HOST),
				steps:  []step{allow("udp-send", addr)},
				after: func(t *testing.T, out []outcome) {
					if got := out[0].detail(); got != token {
						t.Errorf("host echo's token not received: got %q, want %q", got, token)
					}
				},
			}
		}},
		{name: "cannot reach the daemon socket", setup: func(f *fixture) winSpec {
			return winSpec{
				policy: netPolicy(sandboxdv1.Network_HOST),
				steps:  []step{deny("open-rw", socketpath.Default())},
			}
		}},
		{name: "cannot signal host process", setup: func(f *fixture) winSpec {
			host := exec.Command(suite.probe, "hold", "host-"+randomHex())
			if err := host.Start(); err != nil {
				f.t.Fatal(err)
			}
			f.t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
			pid := strconv.Itoa(host.Process.Pid)
			return winSpec{
				policy: netPolicy(sandboxdv1.Network_HOST),
				steps:  []step{deny("kill", pid, "9")},
				after: func(t *testing.T, _ []outcome) {
					if host.ProcessState != nil {
						t.Errorf("host process %s is gone", pid)
					}
				},
			}
		}},
		{name: "daemon environment does not leak", setup: func(f *fixture) winSpec {
			f.t.Setenv("SANDBOXD_CONFORMANCE_LEAK", "leak-"+randomHex())
			return winSpec{
				steps: []step{allow("env")},
				after: func(t *testing.T, out []outcome) {
					vars, _ := out[0].Detail.([]any)
					names := map[string]bool{}
					for _, v := range vars {
						s, _ := v.(string)
						name, _, _ := strings.Cut(s, "=")
						names[strings.ToUpper(name)] = true
					}
					if len(names) == 0 {
						t.Fatalf("probe reported no environment: %v", out[0])
					}
					if names["SANDBOXD_CONFORMANCE_LEAK"] {
						t.Errorf("the client's environment reached the sandbox: %v", vars)
					}
					if !names["SANDBOXD_SESSION"] || !names["SANDBOXD_POLICY_DIGEST"] {
						t.Errorf("session identity missing from the environment: %v", vars)
					}
				},
			}
		}},
		{name: "stdin reaches the command", setup: func(f *fixture) winSpec {
			return winSpec{
				stdin: "hello sandbox\n",
				steps: []step{allow("stdin")},
				after: func(t *testing.T, out []outcome) {
					if got := strings.TrimSpace(out[0].detail()); got != "hello sandbox" {
						t.Errorf("stdin line = %q, want %q", got, "hello sandbox")
					}
				},
			}
		}},
		{name: "loopback is up under network none", setup: func(f *fixture) winSpec {
			return winSpec{policy: netPolicy(sandboxdv1.Network_NONE), steps: []step{deny("loopback")}}
		}},
		{name: "not host root", setup: func(f *fixture) winSpec {
			return winSpec{
				steps: []step{allow("identity")},
				after: func(t *testing.T, out []outcome) {
					id, _ := out[0].Detail.(map[string]any)
					if id["elevated"] != false || id["admin"] != false || id["restricted"] != true {
						t.Errorf("sandbox identity %v: want not elevated, not an administrator, restricted", id)
					}
				},
			}
		}},
		{name: "fork bomb is contained by limits.pids", setup: func(f *fixture) winSpec {
			return winSpec{
				policy: &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Pids: 1}},
				steps:  []step{deny("spawn", "over-limit-"+randomHex())},
			}
		}},
		{name: "memory hog is killed by limits.memory_bytes, a program under it runs", setup: func(f *fixture) winSpec {
			return winSpec{
				policy: &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{MemoryBytes: 256 << 20}},
				steps:  []step{allow("commit", "16"), prepare("commit", "1024")},
				killed: "limit: limits.memory_bytes",
			}
		}},
		{name: "cpu burn is throttled to limits.cpu_millis", setup: func(f *fixture) winSpec {
			return winSpec{
				policy: &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{CpuMillis: 100}},
				steps:  []step{allow("cpu-ratio")},
				after: func(t *testing.T, out []outcome) {
					d, _ := out[0].Detail.(map[string]any)
					// A tenth of a processor asked for; without the cap the
					// spinning probe gets a whole one.
					if r, ok := d["ratio"].(float64); !ok || r > 0.5 {
						t.Errorf("the probe got %v of a processor under a cap of 0.1", d["ratio"])
					}
				},
			}
		}},
		{name: "cannot write through symlink out of write root", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			o := f.file("outside/target", "host\n")
			// Made by the elevated suite: the sandbox's token has no
			// privilege to make one.
			if err := os.Symlink(o, w+`\link`); err != nil {
				f.t.Fatalf("symlink: %v", err)
			}
			return winSpec{
				policy: fsPolicy(list(w), nil, nil),
				steps:  []step{deny("write", w+`\link`)},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, o, "host\n")
				},
			}
		}},
		{name: "cannot connect to host unix socket under network none", setup: func(f *fixture) winSpec {
			path := f.path("host.sock")
			ln, err := net.Listen("unix", path)
			if err != nil {
				f.t.Fatalf("listen on %s: %v", path, err)
			}
			f.t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					_, _ = c.Write([]byte("host\n"))
					c.Close()
				}
			}()
			return winSpec{policy: netPolicy(sandboxdv1.Network_NONE), steps: []step{deny("unix-connect", path)}}
		}},
		{name: "cannot write root-owned file in write root", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			file := f.file("w/admins-only", "admin\n")
			protectedDACL(f.t, file, "D:P(A;;FA;;;SY)(A;;FA;;;BA)(A;;FR;;;WD)")
			return winSpec{
				policy: fsPolicy(list(w), nil, nil),
				steps:  []step{deny("write", file), allow("read", file)},
				after: func(t *testing.T, _ []outcome) {
					unchanged(t, file, "admin\n")
				},
			}
		}},
		{name: "deny path below a directory the sandbox cannot search is denied, not refused", setup: func(f *fixture) winSpec {
			dir := f.mkdir("private")
			secret := f.file("private/secret", "secret\n")
			protectedDACL(f.t, dir, "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)")
			return winSpec{
				policy: fsPolicy(nil, nil, list(secret)),
				steps:  []step{deny("read", secret), allow("env")},
			}
		}},
		{name: "timeout kills the whole session tree, escaped processes too", setup: func(f *fixture) winSpec {
			return winSpec{
				policy: &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(2 * time.Second)}},
				steps:  []step{allow("spawn", "escaped-"+randomHex()), allow("hold", "timeout-"+randomHex())},
				killed: "timeout",
				after: func(t *testing.T, out []outcome) {
					pid, ok := out[0].Detail.(float64)
					if !ok {
						t.Fatalf("spawn reported no pid: %v", out[0])
					}
					if processAlive(int(pid)) {
						t.Errorf("process %d the session started is still running after its timeout", int(pid))
					}
				},
			}
		}},
		{name: "output beyond limits.output_bytes is dropped with one marker, the command runs on", setup: func(f *fixture) winSpec {
			w := f.mkdir("w")
			const limit = 100000
			return winSpec{
				policy: &sandboxdv1.Policy{
					Filesystem: &sandboxdv1.Filesystem{Write: list(w)},
					Limits:     &sandboxdv1.Limits{OutputBytes: limit},
				},
				steps: []step{allow("spew", "1048576"), allow("write", w+`\after`)},
				output: func(t *testing.T, stdout string) {
					if len(stdout) > limit+1024 {
						t.Errorf("%d bytes of output passed a cap of %d", len(stdout), limit)
					}
					if !strings.Contains(stdout, "[sandboxd: output truncated: limits.output_bytes of 100000 bytes reached]") {
						t.Errorf("no truncation marker in the last bytes of output: %q", stdout[max(0, len(stdout)-200):])
					}
					unchanged(t, w+`\after`, payload)
				},
			}
		}},
		{name: "can reach allowed host through the proxy by HTTP, CONNECT and SOCKS", refuses: "network.allow", setup: allowlistRefused},
		{name: "cannot reach host or port not in network.allow through the proxy", refuses: "network.allow", setup: allowlistRefused},
		{name: "an allowed port of the host's loopback is reached as default clients reach it", refuses: "network.allow", setup: allowlistRefused},
		{name: "wildcard host admits names below it, never its apex", refuses: "network.allow", setup: allowlistRefused},
		{name: "cannot reach loopback through an allowed name that resolves there", refuses: "network.allow", setup: allowlistRefused},
		{name: "can reach allowed IPv6 literal, not 127.0.0.1 on its port", refuses: "network.allow", setup: allowlistRefused},
		{name: "cannot leave the sandbox around the proxy", refuses: "network.allow", setup: allowlistRefused},
		{name: "no process survives the session", setup: func(f *fixture) winSpec {
			return winSpec{
				steps: []step{allow("spawn", "survivor-"+randomHex())},
				after: func(t *testing.T, out []outcome) {
					pid, ok := out[0].Detail.(float64)
					if !ok {
						t.Fatalf("spawn reported no pid: %v", out[0])
					}
					if processAlive(int(pid)) {
						t.Errorf("process %d left behind by the session is still running", int(pid))
					}
				},
			}
		}},
	}
}

// TestConformance runs every Windows case on the plain exec path and the
// ConPTY path; both must match the policy and agree step by step.
func TestConformance(t *testing.T) {
	byName := map[string]winCase{}
	for _, c := range windowsCases() {
		byName[c.name] = c
	}
	// The shared list and the Windows cases agree: no case is marked
	// enforced, differing or refused here without being run.
	for name, o := range caseOutcomes {
		c, ok := byName[name]
		switch k := kind(o.windows); {
		case k == "not applicable" && ok:
			t.Errorf("%q runs on Windows, yet the shared list says it does not apply: %q", name, o.windows)
		case k != "not applicable" && !ok:
			t.Errorf("%q is %s on Windows in the shared list, yet no Windows case runs it", name, k)
		case k == "refused" && c.refuses != refusedField(o.windows):
			t.Errorf("%q: refused for %q on Windows by the shared list, the case asserts %q", name, refusedField(o.windows), c.refuses)
		}
	}
	got := map[string]map[bool][]bool{}
	for _, tty := range []bool{false, true} {
		path := map[bool]string{false: "exec", true: "pty"}[tty]
		t.Run(path, func(t *testing.T) {
			for _, c := range windowsCases() {
				t.Run(c.name, func(t *testing.T) {
					o, ok := caseOutcomes[c.name]
					if !ok {
						t.Fatalf("%q is not a case of the shared list (caseOutcomes)", c.name)
					}
					t.Logf("on Windows: %s", o.windows)
					oks := runWindowsCase(t, c, tty)
					if got[c.name] == nil {
						got[c.name] = map[bool][]bool{}
					}
					got[c.name][tty] = oks
				})
			}
		})
	}
	t.Run("exec and pty agree", func(t *testing.T) {
		for name, paths := range got {
			if e, p := paths[false], paths[true]; e != nil && p != nil && !slices.Equal(e, p) {
				t.Errorf("%s: step outcomes differ: exec %v, pty %v", name, e, p)
			}
		}
	})
}

func runWindowsCase(t *testing.T, c winCase, tty bool) []bool {
	f := newFixture(t)
	sp := c.setup(f)
	argv := []string{suite.probe}
	for _, s := range sp.steps {
		argv = append(argv, s.args...)
	}
	start := &sandboxdv1.Start{Policy: sp.policy, Command: &sandboxdv1.Command{Argv: argv}, Tty: tty}
	if tty {
		// Wide enough that the console never wraps a line of the probe's.
		start.Window = &sandboxdv1.WindowSize{Rows: 50, Cols: 2000}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	opts := client.RunOptions{Start: start, Stdout: &stdout, Stderr: &stderr}
	if sp.stdin != "" {
		opts.Stdin = strings.NewReader(sp.stdin)
	}
	res, err := suite.client.Run(ctx, opts)
	refuses := c.refuses
	if tty && refuses == "" {
		// The pseudo console's host would run as LocalSystem outside the
		// job: every PTY session is refused (issue 29 item 4).
		refuses = "process"
	}
	if refuses != "" {
		u := client.UnenforceableFrom(err)
		if u == nil || u.GetField() != refuses || u.GetRemedy() == "" {
			t.Fatalf("want a refusal for %s with a remedy, got %v", refuses, err)
		}
		return nil
	}
	if err != nil {
		t.Fatalf("session failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if sp.output != nil {
		if e := res.Exit; e.GetState() != sandboxdv1.State_EXITED || e.GetExitCode() != 0 {
			t.Fatalf("probe did not exit 0: state %v code %d reason %q", e.GetState(), e.GetExitCode(), e.GetReason())
		}
		sp.output(t, stdout.String())
		return nil
	}
	out := parseOutcomes(stdout.String())
	if sp.killed != "" {
		if e := res.Exit; e.GetState() != sandboxdv1.State_KILLED || e.GetReason() != sp.killed {
			t.Fatalf("session ended %v reason %q, want killed for %q\nstdout:\n%s", e.GetState(), e.GetReason(), sp.killed, stdout.String())
		}
		sp.steps = sp.steps[:max(1, min(len(sp.steps), len(out)))]
	} else if e := res.Exit; e.GetState() != sandboxdv1.State_EXITED || e.GetExitCode() != 0 {
		t.Fatalf("probe did not exit 0: state %v code %d reason %q\nstdout:\n%s\nstderr:\n%s", e.GetState(), e.GetExitCode(), e.GetReason(), stdout.String(), stderr.String())
	}
	if got := res.Enforcement.GetBackend(); got != "windows" {
		t.Errorf("enforced by backend %q, want windows", got)
	}
	oks := checkSteps(t, sp.steps, out, stdout.String())
	if sp.after != nil {
		sp.after(t, out)
	}
	return oks
}
