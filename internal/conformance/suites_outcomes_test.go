package conformance

import (
	"embed"
	"regexp"
	"runtime"
	"slices"
	"testing"
)

// suiteOutcomes is the shared list for the suites beside the case list:
// each test function of the children, exit-code, bad-input, observe and
// audit suites, by name, with what it comes to on each OS, in the kinds of
// caseOutcomes. Every such test starts with outcomeHere, so a test runs
// wherever its outcome is enforced, differs or refused (the test asserts
// that form itself) and is skipped, with the reason, only where the OS
// lacks what it drives. It lives in a file without a build tag so that
// every OS compiles it.
var suiteOutcomes = map[string]outcomes{
	"TestChildSandboxes": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the case is a /bin/sh script in the sandbox that drives sandboxctl through its session's unix socket; Windows has no /bin/sh, and the session pipe it gives a session with children.allow has no case here yet",
	},
	"TestDetachAttachAndSubtreeKill": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the case is a /bin/sh script in the sandbox that starts, detaches and kills children through its session's unix socket; Windows has no /bin/sh",
	},
	"TestCallersSeeTheirOwnSessions": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: it runs sandboxctl as other uids in a unix socket's --socket-group and --operators-group; Windows has no uids or socket groups, the service's pipe DACL decides who may connect",
	},
	"TestSessionSocketIsTheOnlyWayToTheDaemon": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the case is a /bin/sh script in the sandbox that tries the daemon's main unix socket and other sessions' sockets; Windows has no /bin/sh, and its main pipe, whose DACL denies the sandbox users, has no case here yet",
	},
	"TestChildLimitsStayWithinTheParent": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the case is a /bin/sh script that starts a child sandbox through its session's unix socket; Windows has no /bin/sh. Each Windows session, a child's too, gets a top-level job object of its own, outside its parent's budget (issue 29 item 3), which a Windows form of this case must catch",
	},
	"TestChildOutputDrawsFromTheParent": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the case is a /bin/sh script that starts children through its session's unix socket; Windows has no /bin/sh. The cap is the daemon's, the same on every OS",
	},
	"TestChildKeepsItsParentsMechanismSet": {
		linux:   "enforced",
		darwin:  "not applicable: the macOS backend has one mechanism set and reports none, so the case's comparison would hold whatever it did",
		windows: "not applicable: the case is a /bin/sh script that starts a child sandbox through its session's unix socket; Windows has no /bin/sh, and its backend has one mechanism set",
	},
	"TestExitCodes": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the codes it checks are POSIX's: 126 for a file without execute permission and for a directory, 128+N for a signal (SIGTERM sent by /bin/sh, SIGKILL at the timeout); Windows has no execute permission bit, no signals and no /bin/sh",
	},
	"TestSandboxctlExitCodes": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the POSIX exit codes of TestExitCodes, through sandboxctl on the unix socket of a daemon the suite starts itself; on Windows the daemon is the installed service",
	},
	"TestSandboxctlArgumentNotUTF8": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: it runs sandboxctl on the unix socket of a daemon the suite starts itself; on Windows the daemon is the installed service",
	},
	"TestSandboxctlLimits": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: it runs sandboxctl on the unix socket of a daemon the suite starts itself, given --proxy-hosts for its allowlist steps; on Windows the daemon is the installed service, and its limits and its refusal of network.allow are the shared list's cases",
	},
	"TestSandboxctlBadInput": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: it runs sandboxctl on the unix socket of a daemon the suite starts itself, and on unix sockets that are not a daemon or do not exist; on Windows the daemon is the installed service on a named pipe",
	},
	"TestDaemonRejectsBadRequests": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: the daemon validates a request before any backend sees it, the same on every OS",
	},
	"TestUnenforceableIsRefused": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: what the Windows backend reports unenforceable (network ALLOWLIST, filesystem.read LISTED, and every PTY session, for field process) is refused with its field and a remedy; what it reports enforced is skipped, saying so, and covered by the shared list",
	},
	"TestDaemonKilledMidSession": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: it starts a daemon of its own and kills it with SIGKILL; on Windows the daemon is the LocalSystem service (only a service holds the privileges CreateProcessAsUser needs), which the suite installs once",
	},
	"TestWaitingForInput": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the session is a /bin/sh script whose reads the daemon must report as waiting for input; Windows has no /bin/sh",
	},
	"TestDenialsAreRecorded": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the Windows backend observes no denials, and its enforcement report says so for every kind (TestDenialSourcesAreReported)",
	},
	"TestDenialSourcesAreReported": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "enforced: every kind is reported as not observed, with why (no SACL auditing, no Filtering Platform audit, no job notifications read)",
	},
	"TestTimeoutIsKilledTimeout": {
		linux:   "enforced",
		darwin:  "refused: limits.timeout",
		windows: "differs: the exec session is killed with timeout as the reason (the daemon's timer terminates its job object); a PTY session is refused for field process, as the shared list's PTY cases say",
	},
	"TestWatchFollowsASubtree": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the parent session is a /bin/sh script that starts a child through its session's unix socket; Windows has no /bin/sh",
	},
	"TestAuditLog": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: the session is a /bin/sh script writing to /etc, and the test reads the audit log in the state directory of the daemon the suite starts; Windows has no /bin/sh, and its daemon is the installed service",
	},
	"TestAuditLogSurvivesRestart": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: it stops a daemon of its own with SIGTERM and starts it again; Windows has no SIGTERM, and its daemon is the installed service",
	},
	"TestMetrics": {
		linux:   "enforced",
		darwin:  "enforced",
		windows: "not applicable: its sessions run /bin/sh and /bin/true, and it scrapes the metrics address the suite's own daemon logs; Windows has neither, and its daemon is the installed service",
	},
}

// suiteFiles are the files whose tests suiteOutcomes lists, embedded: the
// rootless pass runs the test binary away from its sources.
var suiteFiles = []string{"children_test.go", "exit_test.go", "badinput_test.go", "observe_test.go", "audit_test.go"}

//go:embed children_test.go exit_test.go badinput_test.go observe_test.go audit_test.go
var suiteSources embed.FS

func (o outcomes) here() string {
	return map[string]string{"linux": o.linux, "darwin": o.darwin, "windows": o.windows}[runtime.GOOS]
}

// outcomeHere holds a suite test to what suiteOutcomes says for this OS.
func outcomeHere(t *testing.T) {
	t.Helper()
	o, ok := suiteOutcomes[t.Name()]
	if !ok {
		t.Fatalf("%s is not in suiteOutcomes", t.Name())
	}
	switch here := o.here(); kind(here) {
	case "enforced", "differs", "refused":
	case "not applicable":
		t.Skipf("on %s, %s", runtime.GOOS, here)
	default:
		t.Fatalf("%s on %s: %q starts with no kind", t.Name(), runtime.GOOS, here)
	}
}

// A checkout on Windows may have CRLF line ends.
var suiteTest = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{\r?\n([^\r\n]*)`)

// TestSuiteTestsStateTheirOutcomes: every test of the suites is in
// suiteOutcomes, with an outcome of a known kind for every OS, and starts
// by holding itself to it; the list names no other test.
func TestSuiteTestsStateTheirOutcomes(t *testing.T) {
	var seen []string
	for _, file := range suiteFiles {
		src, err := suiteSources.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range suiteTest.FindAllStringSubmatch(string(src), -1) {
			name := m[1]
			seen = append(seen, name)
			o, ok := suiteOutcomes[name]
			if !ok {
				t.Errorf("%s (%s) is not in suiteOutcomes", name, file)
				continue
			}
			if m[2] != "\toutcomeHere(t)" {
				t.Errorf("%s (%s) does not start with outcomeHere(t): %q", name, file, m[2])
			}
			for os, out := range map[string]string{"linux": o.linux, "darwin": o.darwin, "windows": o.windows} {
				if kind(out) == "" {
					t.Errorf("%s on %s: %q starts with no kind", name, os, out)
				}
			}
		}
	}
	for name := range suiteOutcomes {
		if !slices.Contains(seen, name) {
			t.Errorf("%s is in suiteOutcomes but is no test of %v", name, suiteFiles)
		}
	}
}
