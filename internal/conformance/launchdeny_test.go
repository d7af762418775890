//go:build linux || darwin

package conformance

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// launchCases are about what happens before the command runs: its cwd
// and the lookup of argv0, which must neither lead into a deny path nor
// tell what is there.
func launchCases() []conformanceCase {
	return []conformanceCase{
		{name: "cannot start with its cwd in a deny path", custom: cwdInDenyPath,
			linuxOnly: "not run on macOS yet; the seatbelt profile's deny rules are not measured for a cwd"},
		{name: "exit status does not tell whether a deny path holds the command", custom: argv0InDenyPath,
			linuxOnly: "not run on macOS yet; the seatbelt profile's deny rules are not measured for argv0"},
	}
}

// launchSet runs the probe under pol with cwd as its cwd, which the
// policy allows, and returns the mechanism set the session ran on; ok is
// false when this host refuses the policy, as the case allows.
func launchSet(t *testing.T, c conformanceCase, tty bool, pol *sandboxdv1.Policy, cwd string) (set string, ok bool) {
	t.Helper()
	start := probeStart(tty, pol, nil, "read", ".")
	start.Command.Cwd = cwd
	s := run(t, start, nil)
	if refusedAsAllowed(t, c, s) {
		return "", false
	}
	exitedCleanly(t, s)
	set = s.res.Enforcement.GetMechanismSet()
	checkMechanismSet(t, set)
	return set, true
}

// cwdInDenyPath: a command whose cwd lies in a deny path does not start,
// however the cwd is spelled. The daemon refuses the session naming the
// deny path (the landlock set cannot hide the path; the namespaces set's
// mask would fail the chdir as a directory the sandbox uid may not
// search); a cwd that a symlink leads there, which the daemon cannot see,
// fails at the init as a command that cannot be executed (126).
func cwdInDenyPath(t *testing.T, c conformanceCase, tty bool) {
	f := newFixture(t)
	home := f.mkdir("home")
	secret := f.mkdir("home/.ssh/d")
	f.mkdir("home/x")
	link := f.symlink("home/l", secret)
	// The second deny path, as the daemon orders them too (sorted).
	pol := fsPolicy(nil, nil, list(home+"/.a", home+"/.ssh"))
	pol.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
	set, ok := launchSet(t, c, tty, pol, home)
	if !ok {
		return
	}
	for _, cwd := range []string{secret, home + "/x/../.ssh/d", home + "//.ssh/d", home + "/./.ssh/d", link} {
		start := probeStart(tty, pol, nil, "read", ".")
		start.Command.Cwd = cwd
		s := run(t, start, nil)
		if len(s.outcomes) > 0 {
			t.Errorf("cwd %s: the command ran: %v", cwd, s.outcomes)
		}
		if cwd != link {
			if status.Code(s.err) != codes.InvalidArgument || !strings.Contains(s.err.Error(), "filesystem.deny[1]") {
				t.Errorf("cwd %s: %v, exit %v; want the session refused naming filesystem.deny[1]", cwd, s.err, s.exit())
			}
			continue
		}
		if e := s.exit(); s.err != nil || e.GetState() != sandboxdv1.State_FAILED_TO_START || e.GetExitCode() != 126 {
			t.Errorf("cwd %s (the %s set): %v, exit %v; want it failed to start with 126", cwd, set, s.err, e)
		}
	}
}

// argv0InDenyPath: a command named by its path in a deny path fails to
// start the same way whether the deny path holds it or not, so that the
// exit status does not tell. The landlock set, which cannot hide the deny
// path, has the init judge where the name resolves and end both as a
// missing file (127); the namespaces set masks the deny path with a
// directory the sandbox cannot search, so both end as a file it may not
// execute (126).
func argv0InDenyPath(t *testing.T, c conformanceCase, tty bool) {
	f := newFixture(t)
	bin := f.mkdir("secret/bin")
	tool := f.file("secret/bin/tool", "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	pol := fsPolicy(nil, nil, list(f.path("secret")))
	pol.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
	set, ok := launchSet(t, c, tty, pol, f.dir)
	if !ok {
		return
	}
	want := map[string]int32{"landlock": 127, "namespaces": 126}[set]
	reasons := map[string]string{}
	for _, argv0 := range []string{tool, bin + "/missing"} {
		s := run(t, commandStart(tty, pol, nil, argv0), nil)
		e := s.exit()
		if s.err != nil || e.GetState() != sandboxdv1.State_FAILED_TO_START || e.GetExitCode() != want {
			t.Errorf("%s (the %s set): %v, exit %v; want it failed to start with %d", argv0, set, s.err, e, want)
		}
		reasons[argv0] = strings.ReplaceAll(e.GetReason(), argv0, "ARGV0")
	}
	if a, b := reasons[tool], reasons[bin+"/missing"]; a != b {
		t.Errorf("the reasons tell the file there from one missing: %q, %q", a, b)
	}
}
