package conformance

import (
	"fmt"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Helpers of the allowlist and limits cases that the suites built on every
// OS (exit codes, children, audit) use too.

// allowPolicy is network ALLOWLIST with entries.
func allowPolicy(entries ...*sandboxdv1.NetworkAllow) *sandboxdv1.Policy {
	return &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: entries}}
}

func allowEntry(host string, port int) *sandboxdv1.NetworkAllow {
	return &sandboxdv1.NetworkAllow{Host: host, Port: uint32(port)}
}

// proxyStep is one step through the proxy: how, to where, and, for a
// denied one, the denial the proxy must answer and record.
type proxyStep struct {
	op, target string
	allowed    bool
	// token is what the origin behind target answers, for an allowed step.
	token string
	// detail must be in a denial's detail.
	detail string
}

func detailMap(o outcome) map[string]any {
	d, _ := o.Detail.(map[string]any)
	return d
}

// reachedOrigin fails the test unless o got the origin's own answer.
func reachedOrigin(t *testing.T, p proxyStep, o outcome) {
	t.Helper()
	if body, _ := detailMap(o)["body"].(string); body != p.token {
		t.Errorf("%s %s: the origin's token %q not received: %v", p.op, p.target, p.token, o)
	}
}

// deniedByProxy fails the test unless o failed because the proxy refused
// target, saying so: a step that failed any other way (no proxy, a broken
// tunnel) proves nothing about network.allow.
func deniedByProxy(t *testing.T, p proxyStep, o outcome) {
	t.Helper()
	d := detailMap(o)
	if p.op == "socks-connect" {
		if reply, _ := d["reply"].(float64); reply != 2 {
			t.Errorf("%s %s: want SOCKS5 reply 2 (connection not allowed by ruleset), got %v", p.op, p.target, o)
		}
		return
	}
	status, _ := d["status"].(float64)
	why, _ := d["denied"].(string)
	if status != 403 || !strings.Contains(why, p.target) {
		t.Errorf("%s %s: want 403 with X-Sandboxd-Denied naming %s, got %v", p.op, p.target, p.target, o)
	}
}

// The limits the cases set: small, so that hitting them takes the 2-core
// machines the suite runs on a second or two.
const (
	pidsLimit   = 64
	memoryLimit = 64 << 20
	// cpuLimit is a fifth of a CPU; a spin gets about a whole one
	// unthrottled, so maxCPURatio tells the two apart with room for the
	// throttle's granularity.
	cpuLimit    = 200
	maxCPURatio = 0.45
	outputLimit = 100000
)

// truncationMarker is the one line the daemon appends to a session's
// output when it reaches limits.output_bytes of n bytes.
func truncationMarker(n int) string {
	return fmt.Sprintf("\n[sandboxd: output truncated: limits.output_bytes of %d bytes reached]\n", n)
}

// checkForkBomb: the bomb's forks failed with EAGAIN, the pids limit's
// errno, after holding at least least children (so its forks work, and
// failed for the limit, not for another reason), never more than limit.
// The limit counts every task of the sandbox, the probe's own threads too,
// so the bomb holds a few less.
func checkForkBomb(t *testing.T, o outcome, least, limit int) {
	t.Helper()
	d := detailMap(o)
	held, _ := d["held"].(float64)
	switch {
	case o.OK || o.Errno != "EAGAIN":
		t.Errorf("fork-bomb: want its forks to fail with EAGAIN (the pids limit), got %v", o)
	case held > float64(limit):
		t.Errorf("fork-bomb held %v children under a limit of %d tasks: %v", held, limit, o)
	case held < float64(least):
		t.Errorf("fork-bomb held only %v children (want at least %d): its forks failed for another reason than the limit: %v", held, least, o)
	}
}
