package launcherlinux

import (
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/launcher"
)

// sessionScript prints the autogroup of the command's parent (the init) and
// the command's own, then the command's pid, process group and session.
const sessionScript = `cat /proc/$PPID/autogroup /proc/$$/autogroup; echo $$; cut -d' ' -f5,6 /proc/$$/stat`

// sessionLines parses sessionScript's output: the init's and the
// command's autogroups, the command's pid, its process group and session.
func sessionLines(t *testing.T, out string) (initGroup, ownGroup, pid, pgrp, sid string) {
	t.Helper()
	f := strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r", "")), "\n")
	if len(f) != 4 {
		t.Fatalf("want 4 lines, got %q", out)
	}
	ids := strings.Fields(f[3])
	if len(ids) != 2 {
		t.Fatalf("process group and session: %q", f[3])
	}
	return f[0], f[1], f[2], ids[0], ids[1]
}

// An idle pipe session is one task group of the scheduler's, not two: the
// command leads a process group of its own (the init forwards signals to
// it) within the init's session, where a session of its own was a second
// autogroup, with a run queue and an entity per CPU. A terminal session's
// command leads the terminal's session.
func TestACommandSharesTheInitsSessionUnlessItHasATerminal(t *testing.T) {
	if _, err := os.Stat("/proc/self/autogroup"); err != nil {
		t.Skipf("no scheduler autogroups here: %v", err)
	}
	for _, tc := range []struct {
		name string
		b    func(*testing.T) launcher.Backend
	}{
		{"namespaces", func(t *testing.T) launcher.Backend { return newBackend(t) }},
		{"landlock", func(t *testing.T) launcher.Backend { return landlockBackend(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b(t)
			out, serr, st := runWith(t, b, nil, "/bin/sh", "-c", sessionScript)
			if st.ExitCode != 0 {
				t.Fatalf("status %+v\n%s%s", st, out, serr)
			}
			initGroup, ownGroup, pid, pgrp, sid := sessionLines(t, out)
			if initGroup == "" || initGroup != ownGroup {
				t.Errorf("pipe session: the command's autogroup %q, the init's %q: want one", ownGroup, initGroup)
			}
			if pgrp != pid || sid == pid {
				t.Errorf("pipe session: command %s in process group %s, session %s: want its own group in the init's session", pid, pgrp, sid)
			}

			out = runTerminal(t, b, testSpec(t, nil, "/bin/sh", "-c", sessionScript))
			initGroup, ownGroup, pid, pgrp, sid = sessionLines(t, out)
			if initGroup == ownGroup {
				t.Errorf("terminal session: the command shares the init's autogroup %q, so not a session of its own", initGroup)
			}
			if pgrp != pid || sid != pid {
				t.Errorf("terminal session: command %s in process group %s, session %s: want it to lead both", pid, pgrp, sid)
			}
		})
	}
}
