package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// daemonKeyringUnreached: a sandbox neither has the daemon's session
// keyring nor reaches a key in it, by its description or by its id. Under
// a seccomp filter the key calls are denied; a session without one (the
// namespaces set under network HOST on a host without seccomp, e.g.
// hostsim --deny seccomp) gets a session keyring of its own. The case
// starts a daemon of its own, as the suite's is (its mechanism set, its
// wrap), whose session keyring holds a key.
func daemonKeyringUnreached(t *testing.T, c conformanceCase, tty bool) {
	d, ring, key, desc := keyringDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	steps := []step{
		prepare("session-keyring"),
		deny("key-search", desc),
		deny("key-read", strconv.Itoa(key)),
	}
	var args []string
	for _, st := range steps {
		args = append(args, st.args...)
	}
	s := runWith(t, cl, probeStart(tty, netPolicy(sandboxdv1.Network_HOST), nil, args...), nil)
	if refusedAsAllowed(t, c, s) {
		return
	}
	exitedCleanly(t, s)
	set := s.res.Enforcement.GetMechanismSet()
	checkMechanismSet(t, set)
	t.Logf("the %s set, on a daemon whose session keyring is %d", set, ring)
	checkSteps(t, steps, s.outcomes, s.String())
	if o := s.outcomes[0]; o.OK && o.detail() == strconv.Itoa(ring) {
		t.Errorf("the sandbox's session keyring is the daemon's, %d", ring)
	}
}

// keyringFlag, first on the test binary's command line, makes it the
// wrapper keyringDaemon starts the daemon with: it joins a new session
// keyring, adds a user key to it, says both on its stdout and runs the
// rest of its command line in their place.
const keyringFlag = "-sandboxd-conformance-keyring="

// The wrapper's work is done before the tests exist: init runs on the
// process's one thread, whose session keyring execve keeps.
func init() {
	if len(os.Args) < 3 || !strings.HasPrefix(os.Args[1], keyringFlag) {
		return
	}
	desc := strings.TrimPrefix(os.Args[1], keyringFlag)
	ring, err := unix.KeyctlJoinSessionKeyring(desc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "join a session keyring: %v\n", err)
		os.Exit(1)
	}
	key, err := unix.AddKey("user", desc, []byte("secret of the daemon's"), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		fmt.Fprintf(os.Stderr, "add a key: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s keyring %d key %d\n", desc, ring, key)
	// The suite's wrap may name its program (bwrap) without a path.
	prog := os.Args[2]
	if p, err := exec.LookPath(prog); err == nil {
		prog = p
	}
	err = unix.Exec(prog, os.Args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "exec %s: %v\n", os.Args[2], err)
	os.Exit(1)
}

// keyringDaemon starts a daemon as startDaemon does, with a session
// keyring of its own that holds a user key: the daemon's keyring and the
// key's id and description. A thread of the suite's cannot join that
// keyring for it: the thread, kept from every other goroutine, would end
// with the test, and with it any daemon it had started before (their
// death signal is their parent thread's).
func keyringDaemon(t *testing.T) (d *daemonProc, ring, key int, desc string) {
	t.Helper()
	desc = "sandboxd-conformance-" + randomHex()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	if suite.mechanism != "" {
		args = append(args, "--mechanism", suite.mechanism)
	}
	wrap := append([]string{self, keyringFlag + desc}, suite.wrap...)
	d, err = startDaemonWith(filepath.Join(suite.root, "keyring-"+randomHex()), wrap, args...)
	if err != nil {
		t.Fatalf("a daemon with a session keyring of its own: %v", err)
	}
	t.Cleanup(func() {
		d.stop()
		os.RemoveAll(filepath.Dir(d.socket))
	})
	log, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(string(log), desc+" keyring %d key %d", &ring, &key); err != nil {
		t.Fatalf("the daemon's wrapper did not say its keyring: %v\n%s", err, d.logTail())
	}
	return d, ring, key, desc
}
