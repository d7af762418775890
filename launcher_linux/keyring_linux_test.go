package launcherlinux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/hostsim"
	"golang.org/x/sys/unix"
)

// envNoSeccompKeyring runs TestNoSeccompSessionHasItsOwnKeyring's child.
const envNoSeccompKeyring = "SANDBOXD_TEST_NO_SECCOMP_KEYRING"

// On a host without seccomp the namespaces set runs a network-host policy
// with no filter, which would deny the key calls: the command must not
// possess the daemon's session keyring, with every key it holds.
func TestNoSeccompSessionHasItsOwnKeyring(t *testing.T) {
	switch os.Getenv(envNoSeccompKeyring) {
	case "print":
		// The sandboxed command: its session keyring.
		id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
		fmt.Println(id, err)
		return
	case "launch":
		noSeccompKeyringChild(t, nil, true)
		return
	case "launch-without-keys":
		noSeccompKeyringChild(t, []uint32{unix.SYS_KEYCTL, unix.SYS_ADD_KEY}, true)
		return
	case "launch-keyctl-faked":
		noSeccompKeyringChild(t, []uint32{unix.SYS_KEYCTL}, false)
		return
	}
	runNoSeccompKeyringChild(t, "launch")
}

// A kernel without keys (CONFIG_KEYS=n, the key calls failing with
// ENOSYS) has no keyring to leak: a session on a host without seccomp
// starts there. A filter that fakes ENOSYS for keyctl alone, where add_key
// is there, does not pass for such a kernel: the launch fails.
func TestNoSeccompSessionStartsOnAKernelWithoutKeys(t *testing.T) {
	runNoSeccompKeyringChild(t, "launch-without-keys")
	runNoSeccompKeyringChild(t, "launch-keyctl-faked")
}

func runNoSeccompKeyringChild(t *testing.T, mode string) {
	// Keyrings are a thread's: this one, never unlocked, ends with the
	// test, and the child it starts has the keyring in every thread.
	runtime.LockOSThread()
	if _, err := unix.KeyctlJoinSessionKeyring("sandboxd-test-daemon-keyring"); err != nil {
		t.Skipf("cannot join a session keyring: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNoSeccompSessionHasItsOwnKeyring$", "-test.v")
	cmd.Env = append(os.Environ(), envNoSeccompKeyring+"="+mode)
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP"):
		t.Skipf("%s", out)
	case err != nil || !strings.Contains(string(out), "--- PASS"):
		t.Errorf("%v\n%s", err, out)
	}
}

// noSeccompKeyringChild, with the session keyring its parent joined, denies itself
// seccomp (the spawner and its inits inherit that), and launches a copy of
// the test binary (the sandbox has a private /tmp) that prints its session
// keyring. The calls in refuse fail with ENOSYS for it and what it
// starts; then the command need only start, or, wantStart false, must not.
func noSeccompKeyringChild(t *testing.T, refuse []uint32, wantStart bool) {
	daemonRing, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	if err != nil {
		t.Fatal(err)
	}
	// The filters are this thread's: it must be the one hostsim installs
	// its own from (with TSYNC), and the one that starts the daemon's
	// spawner.
	runtime.LockOSThread()
	for _, nr := range refuse {
		if err := refuseSyscall(nr); err != nil {
			t.Skipf("cannot install the denial of system call %d: %v", nr, err)
		}
	}
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	copied := hostDir(t, 0o755) + "/launcher.test"
	if err := os.WriteFile(copied, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	prog, err := hostsim.Program([]string{"seccomp"}, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if err := hostsim.Install(prog); err != nil {
		t.Skipf("cannot install the seccomp denial: %v", err)
	}
	uid, gid := sandboxIdentity()
	b, err := New(Config{SandboxUID: uid, SandboxGID: gid, MechanismSet: string(SetNamespaces), InitPath: initBinaryPath(t)})
	if err != nil {
		t.Skipf("no namespaces set here: %v", err)
	}
	if b.(*backend).host.Get(PrimSeccomp).OK {
		t.Fatal("the probe found seccomp working under the denial")
	}
	pol := &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}}
	spec := testSpec(t, pol, copied, "-test.run=^TestNoSeccompSessionHasItsOwnKeyring$")
	spec.Env = append(spec.Env, envNoSeccompKeyring+"=print")
	if !wantStart {
		p, err := b.Start(context.Background(), spec)
		if err == nil {
			p.Kill()
			p.Wait()
			t.Fatal("the command started where keyctl alone fails with ENOSYS")
		}
		if !strings.Contains(err.Error(), "add_key") {
			t.Fatalf("Start = %v, want the keyring step's failure", err)
		}
		return
	}
	out, serr, _, st, err := runSpec(t, b, spec)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if len(refuse) > 0 {
		return
	}
	var ring int
	var ringErr string
	if _, err := fmt.Sscan(out, &ring, &ringErr); err != nil || ringErr != "<nil>" {
		t.Fatalf("the command printed %q, want its session keyring", out)
	}
	if ring == daemonRing {
		t.Errorf("the command possesses the daemon's session keyring %d", daemonRing)
	}
}
