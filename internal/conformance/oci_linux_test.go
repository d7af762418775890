package conformance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
	"github.com/sandboxd/sandboxd/policy"
	"golang.org/x/sys/unix"
)

// ociCases are the cases whose policies an OCI config can express
// (filesystem, network none and host, the process's isolation): each runs
// in a bundle that sandboxctl export-oci wrote, under each runtime, and
// must give the outcomes the case wants and sandboxd gives.
var ociCases = []string{
	"can write inside write root",
	"cannot write outside write roots",
	"cannot write through symlink out of write root",
	"cannot write via hardlink to file outside",
	"cannot write existing read-only carve-out",
	"cannot create not-yet-existing read-only carve-out",
	"cannot rename read-only carve-out",
	"cannot rename ancestor of carve-out then recreate it",
	"cannot move deny path in write root out from under its mask",
	"cannot read deny path",
	"cannot write deny path in write root",
	"cannot connect TCP to host listener under network none",
	"can connect TCP to host listener under network host",
	"cannot reach host UDP listener under network none",
	"can reach host UDP listener under network host",
	"cannot connect to host unix socket under network none",
	"cannot reach the daemon socket",
	"cannot see host processes or devices even with write to /",
	"cannot signal host process",
	"cannot write kernel knobs",
	"loopback is up under network none",
}

// ociRefusedCases are cases whose policies export-oci must refuse, with
// the field it must name.
var ociRefusedCases = map[string]string{
	"cannot read outside listed read roots":                            "filesystem.read",
	"cannot reach host or port not in network.allow through the proxy": "network.allow",
}

// runtimeRefusesHost is what Debian 12's crun 1.8.1 answers on a host
// whose cgroup layout is hybrid (v1 controllers beside a v2 hierarchy),
// whatever the config says.
const runtimeRefusesHost = "cgroups in hybrid mode not supported"

// TestOCIBundles runs conformance cases in exported bundles under runc and
// crun and compares their outcomes with sandboxd's, case by case.
func TestOCIBundles(t *testing.T) {
	if suite.mechanism != "" || len(suite.wrap) > 0 {
		t.Skipf("exports are of the namespaces set; this run forces the daemon to %q, wrapped in %q", suite.mechanism, suite.wrap)
	}
	if !suite.asRoot {
		t.Skip("the bundles map the sandbox uid, which only root may map for a runtime: this suite runs rootless")
	}
	byName := map[string]conformanceCase{}
	for _, c := range cases() {
		byName[c.name] = c
	}
	t.Run("refused", func(t *testing.T) {
		for name, field := range ociRefusedCases {
			c, ok := byName[name]
			if !ok {
				t.Fatalf("no conformance case %q", name)
			}
			sp := c.setup(newFixture(t))
			out, code := exportOCI(t, sp)
			if code == 0 || !strings.Contains(out, "export-oci: "+field+": ") {
				t.Errorf("%s: export-oci exited %d, want a refusal naming %s:\n%s", name, code, field, out)
			}
		}
	})
	for _, rt := range []string{"runc", "crun"} {
		t.Run(rt, func(t *testing.T) {
			bin, err := exec.LookPath(rt)
			if err != nil {
				t.Skipf("%s is not installed (make deps installs it): %v", rt, err)
			}
			if out, refused := runtimeRefuses(t, bin); refused {
				if rt == "runc" {
					t.Fatalf("runc refused this host: %s", out)
				}
				t.Skipf("%s refuses this host whatever the config says: %s", rt, strings.TrimSpace(out))
			}
			for _, name := range ociCases {
				c, ok := byName[name]
				if !ok {
					t.Fatalf("no conformance case %q", name)
				}
				t.Run(name, func(t *testing.T) { compareBundle(t, rt, bin, c, nil) })
			}
			t.Run("denied system calls are refused", func(t *testing.T) {
				if runtime.GOARCH != "amd64" {
					t.Skipf("sandboxd's filter exists for amd64 only; this is %s", runtime.GOARCH)
				}
				c, names := deniedSyscallsCase(t)
				compareBundle(t, rt, bin, c, func(sp *spec, s *session) {
					for i, st := range sp.steps {
						name := names[st.args[1]]
						if name != "" && strings.Contains(s.stderr, `unknown seccomp syscall \"`+name+`\" ignored`) {
							t.Logf("%s's libseccomp does not know %s (syscall %s) and leaves it out of the filter: not compared", rt, name, st.args[1])
							sp.steps[i].want = either
						}
					}
				})
			})
		})
	}
}

// compareBundle runs c in a bundle under the runtime bin, checks the
// outcomes against the case's, then runs c on sandboxd and compares.
// runtimeLimits, when set, marks the steps whose outcome is the runtime's
// own gap, not the config's, with what the runtime said.
func compareBundle(t *testing.T, rt, bin string, c conformanceCase, runtimeLimits func(*spec, *session)) {
	sp := c.setup(newFixture(t))
	s := runBundle(t, bin, sp)
	if runtimeLimits != nil {
		// The case's steps are sandboxd's too, which keeps its wants.
		sp.steps = slices.Clone(sp.steps)
		runtimeLimits(&sp, s)
	}
	oks := checkSteps(t, sp.steps, s.outcomes, s.String())
	if sp.after != nil {
		sp.after(t, s)
	}
	if t.Failed() {
		return
	}
	// sandboxd on the same case, in a fixture of its own. Steps that only
	// prepare may go either way: runc gives a masked directory the mode
	// of the one it covers, so it lists as empty where sandboxd's refuses
	// the listing.
	want := runCase(t, c, false)
	for i, st := range sp.steps {
		if want != nil && st.want != either && oks[i] != want[i] {
			t.Errorf("step %d (%s): %s ok=%v, sandboxd ok=%v", i, strings.Join(st.args, " "), rt, oks[i], want[i])
		}
	}
	// And sandboxd running an exported config itself, of a fixture of
	// its own too.
	sp2 := c.setup(newFixture(t))
	config, code := exportOCI(t, sp2)
	if code != 0 {
		t.Fatalf("sandboxctl export-oci exited %d: %s", code, config)
	}
	byOCI := runOCIOnSandboxd(t, config, sp2.stdin)
	if len(byOCI) != len(sp.steps) {
		t.Fatalf("sandboxctl run --oci: probe reported %d steps, want %d", len(byOCI), len(sp.steps))
	}
	for i, st := range sp.steps {
		if st.want != either && oks[i] != byOCI[i].OK {
			t.Errorf("step %d (%s): %s ok=%v, sandboxctl run --oci of the same config %s", i, strings.Join(st.args, " "), rt, oks[i], byOCI[i])
		}
	}
}

// runOCIOnSandboxd runs config with sandboxctl run --oci on the suite's
// daemon and returns the probe's outcomes.
func runOCIOnSandboxd(t *testing.T, config, stdin string) []outcome {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(suite.sandboxctl, "--socket", suite.daemon.socket, "run", "--oci", file)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sandboxctl run --oci: %v\n%s", err, stderr.String())
	}
	return parseOutcomes(stdout.String())
}

// deniedSyscallsCase tries, with zero arguments, every call sandboxd's
// filter refuses: an OCI runtime resolves the rules' names with its own
// libseccomp, which skips names it does not know (runc 1.1.5's, at debug
// level only: "unknown seccomp syscall \"open_tree_attr\" ignored"), and
// only its -ENOSYS stub for numbers above those it knows refuses those.
// names maps each step's number to the call's name.
func deniedSyscallsCase(t *testing.T) (c conformanceCase, names map[string]string) {
	r, err := launcherlinux.SeccompRulesFor(launcherlinux.SeccompOptions{RestrictSocketFamilies: true})
	if err != nil {
		t.Fatal(err)
	}
	steps := []step{allow("syscall", strconv.Itoa(unix.SYS_GETPID))}
	names = map[string]string{}
	for _, sc := range slices.Concat(r.Denied, r.NoSys) {
		if sc.Name == "ptrace" {
			// ptrace(PTRACE_TRACEME) would make the probe its parent's
			// tracee; the cases on processes cover ptrace.
			continue
		}
		nr := strconv.Itoa(int(sc.Nr))
		names[nr] = sc.Name
		steps = append(steps, deny("syscall", nr))
	}
	c = conformanceCase{name: "denied system calls are refused", setup: func(*fixture) spec { return spec{steps: steps} }}
	return c, names
}

// exportOCI runs sandboxctl export-oci for sp's policy and probe steps,
// hiding the suite daemon's socket as that daemon does. It returns the
// config (or what sandboxctl said) and the exit code.
func exportOCI(t *testing.T, sp spec) (string, int) {
	t.Helper()
	pol, err := policy.Encode(sp.policy)
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pf, pol, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--socket", suite.daemon.socket, "export-oci", "--policy", pf, "--cwd", "/"}
	for k, v := range sp.env {
		args = append(args, "--env", k+"="+v)
	}
	args = append(append(args, "--", suite.probe), probeArgs(sp)...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(suite.sandboxctl, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("sandboxctl export-oci: %v", err)
		}
		return stderr.String(), ee.ExitCode()
	}
	return stdout.String(), 0
}

func probeArgs(sp spec) []string {
	var args []string
	for _, s := range sp.steps {
		args = append(args, s.args...)
	}
	return args
}

// runBundle exports sp into a bundle and runs it to its end under the
// runtime bin.
func runBundle(t *testing.T, bin string, sp spec) *session {
	t.Helper()
	config, code := exportOCI(t, sp)
	if code != 0 {
		t.Fatalf("sandboxctl export-oci exited %d: %s", code, config)
	}
	out, _ := runOCI(t, bin, config, sp.stdin)
	return &session{stdout: out.stdout, stderr: out.stderr, outcomes: parseOutcomes(out.stdout)}
}

type ociOutput struct{ stdout, stderr string }

// runOCI runs config in a fresh bundle under bin and deletes the
// container whatever happened.
func runOCI(t *testing.T, bin, config, stdin string) (ociOutput, error) {
	t.Helper()
	// Under the suite's root, which the sandbox uid can search: the
	// runtime binds the rootfs from inside the user namespace.
	bundle, err := os.MkdirTemp(suite.root, "oci-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bundle) })
	if err := os.Chmod(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	id := "sbd-conf-" + randomHex()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--bundle", bundle, id}
	if filepath.Base(bin) == "runc" {
		// It says only at debug level which rules it drops.
		args = append([]string{"--debug"}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	_ = exec.Command(bin, "delete", "--force", id).Run()
	return ociOutput{stdout.String(), stderr.String()}, err
}

// runtimeRefuses runs /bin/true in an exported bundle and reports
// whether the runtime refused the host itself (runtimeRefusesHost).
func runtimeRefuses(t *testing.T, bin string) (string, bool) {
	t.Helper()
	out, err := exec.Command(suite.sandboxctl, "export-oci", "--cwd", "/", "--", trueCmd).Output()
	if err != nil {
		t.Fatalf("sandboxctl export-oci: %v", err)
	}
	res, err := runOCI(t, bin, string(out), "")
	if err == nil {
		return "", false
	}
	if strings.Contains(res.stderr+res.stdout, runtimeRefusesHost) {
		return res.stderr + res.stdout, true
	}
	t.Fatalf("%s run of an exported /bin/true: %v\n%s%s", filepath.Base(bin), err, res.stdout, res.stderr)
	return "", false
}
