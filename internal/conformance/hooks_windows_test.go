package conformance

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// trueCmd is a program that exits 0 and needs nothing the sandbox may
// deny: Windows has no true(1).
const trueCmd = `C:\Windows\System32\hostname.exe`

// refusalsAllowed: the Windows backend's mechanism set has no optional
// parts, so a policy the suite runs is refused only where the shared list
// says so.
func refusalsAllowed() bool {
	return false
}

// sameTarget compares denial targets as Windows paths: case-insensitive,
// with either separator.
func sameTarget(got, want string) bool {
	return strings.EqualFold(filepath.Clean(got), filepath.Clean(want))
}

// processesWith lists the processes whose command line holds marker, other
// than the suite's own query.
func processesWith(marker string) []int {
	script := fmt.Sprintf(`Get-CimInstance Win32_Process | Where-Object { $_.ProcessId -ne $PID -and $_.CommandLine -like '*%s*' } | ForEach-Object { $_.ProcessId }`,
		strings.ReplaceAll(marker, "'", "''"))
	out, _ := exec.Command("powershell", "-NoProfile", "-NonInteractive", "-Command", script).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// credentialOf: Windows has no uid to run a host process as. Only
// TestCallersSeeTheirOwnSessions uses it, which is not applicable here
// (suiteOutcomes).
func credentialOf(int, []uint32) *syscall.SysProcAttr {
	return nil
}

// hugeArgv: an argv past the daemon's count limit (64 Ki arguments) does
// not fit a Windows command line (32767 characters), so sandboxctl cannot
// be started with one. Only TestSandboxctlBadInput uses it, which is not
// applicable here (suiteOutcomes).
func hugeArgv() []string {
	return nil
}

// enforcedHere says why feature is not for TestUnenforceableIsRefused: the
// Windows backend reports it enforces it.
func enforcedHere(feature string) string {
	for _, f := range suite.caps.GetFeatures() {
		if f.GetFeature() == feature && f.GetEnforceable() {
			return fmt.Sprintf("the windows backend reports it enforces %s (mechanism set %q); this test is about what a backend refuses", feature, f.GetMechanismSet())
		}
	}
	return ""
}

// sessionSocketIn and sessionSocketInScript: a Windows session with
// children.allow gets a session pipe, not a unix socket. Only the children
// suite's /bin/sh scripts use them, which are not applicable here
// (suiteOutcomes).
func sessionSocketIn(id string) string {
	return hostSessionSocket(id)
}

func sessionSocketInScript() string {
	return hostSessionSocket("none")
}

// mustObserve: the Windows backend observes no denials yet (its
// enforcement report's denial sources say so), so none is required, and
// there are no denialCases: TestDenialsAreRecorded is not applicable here.
var mustObserve []string

func denialCases(string) []denialCase {
	return nil
}

func wantDenial(c denialCase, _ *client.Result) (*sandboxdv1.Denial, func(*sandboxdv1.Denial) bool) {
	return c.want, func(d *sandboxdv1.Denial) bool {
		return d.GetField() == c.want.Field && sameTarget(d.GetTarget(), c.want.Target)
	}
}

// holdArgv is a command that runs until it is killed: Windows has no
// sleep(1).
func holdArgv() []string {
	return []string{suite.probe, "hold", "hold-" + randomHex()}
}
