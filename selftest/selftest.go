// Package selftest checks a backend end to end: it starts a probe program
// through the backend's one Start, under a representative policy, and
// checks that the sandbox is denied what the policy denies and allowed what
// it allows. The probe is the calling binary itself, re-executed under the
// name ProbeName; every binary that runs Run calls RunProbeIfRequested
// first thing in main (or TestMain).
package selftest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// ProbeName is argv[0]'s base name that turns a binary into the probe.
const ProbeName = "sandboxd-selftest-probe"

// Step names, both on the probe's command line ("name=argument") and as the
// names of the checks they produce.
const (
	StepWriteRoot    = "write-root"
	StepWriteOutside = "write-outside"
	StepChmodOutside = "chmod-outside"
	StepReadDeny     = "read-deny"
	StepTCPLoopback  = "tcp-loopback"
	StepUnixSocket   = "unix-socket"
	StepSignalDaemon = "signal-daemon"
	StepNonRoot      = "non-root"
)

// step is one thing the probe tries inside the sandbox.
type step struct {
	name string
	// allowed says whether the policy lets the sandbox do it: the check
	// passes when the probe's outcome matches.
	allowed bool
	// what describes the attempt in the check's detail.
	what string
}

// steps are in the order the probe runs them and the checks are reported.
var steps = []step{
	{StepWriteRoot, true, "write a file inside the write root"},
	{StepWriteOutside, false, "write a file outside the write roots (writable by permissions)"},
	{StepChmodOutside, false, "chmod a directory outside the write roots (owned by the sandbox uid)"},
	{StepReadDeny, false, "read a filesystem.deny file (readable by permissions)"},
	{StepTCPLoopback, false, "TCP connect to a listener on the host's 127.0.0.1 under network NONE"},
	{StepUnixSocket, false, "connect to a host unix socket (mode 0777) under network NONE"},
	{StepSignalDaemon, false, "kill(daemon pid, 0)"},
	{StepNonRoot, true, "run as a uid other than 0"},
}

// probeResult is one line of the probe's output.
type probeResult struct {
	Step string `json:"step"`
	// OK says whether the attempt succeeded, whether or not it should have.
	OK  bool   `json:"ok"`
	Err string `json:"err"`
}

// parseResults reads the probe's JSON lines. Lines that are not results
// are skipped: the verdict rests on which steps reported, and a step
// without a line fails.
func parseResults(r io.Reader) map[string]probeResult {
	out := map[string]probeResult{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var res probeResult
		if json.Unmarshal(sc.Bytes(), &res) == nil && res.Step != "" {
			if _, dup := out[res.Step]; !dup {
				out[res.Step] = res
			}
		}
	}
	return out
}

// evaluate turns the probe's output into checks: one per step, in order,
// each passing only when the probe reported that step with the outcome the
// policy demands.
func evaluate(output []byte) []*sandboxdv1.SelfTestCheck {
	results := parseResults(bytes.NewReader(output))
	checks := make([]*sandboxdv1.SelfTestCheck, 0, len(steps))
	for _, s := range steps {
		res, ok := results[s.name]
		c := &sandboxdv1.SelfTestCheck{Name: s.name}
		switch {
		case !ok:
			c.Detail = s.what + ": the probe reported no result"
		case s.allowed && res.OK:
			c.Ok, c.Detail = true, s.what+": allowed"
		case s.allowed:
			c.Detail = s.what + ": failed but must be allowed: " + res.Err
		case res.OK:
			c.Detail = s.what + ": NOT denied"
		default:
			c.Ok, c.Detail = true, s.what+": denied: "+res.Err
		}
		checks = append(checks, c)
	}
	return checks
}

// passed is whether every check passed; no checks is no evidence.
func passed(checks []*sandboxdv1.SelfTestCheck) bool {
	for _, c := range checks {
		if !c.GetOk() {
			return false
		}
	}
	return len(checks) > 0
}

// Summary is one line about st for logs: which mechanism set passed, or
// which checks failed.
func Summary(st *sandboxdv1.SelfTest) string {
	if st == nil {
		return "self-test has not run"
	}
	if st.GetPassed() {
		return fmt.Sprintf("self-test passed (mechanism set %s)", orUnknown(st.GetMechanismSet()))
	}
	var failed []string
	for _, c := range st.GetChecks() {
		if !c.GetOk() {
			failed = append(failed, c.GetName()+": "+c.GetDetail())
		}
	}
	msg := "self-test FAILED"
	if st.GetMechanismSet() != "" {
		msg += " (mechanism set " + st.GetMechanismSet() + ")"
	}
	if len(failed) == 0 {
		return msg + ": no checks ran"
	}
	for i, f := range failed {
		if i == 0 {
			msg += ": " + f
		} else {
			msg += "; " + f
		}
	}
	return msg
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
