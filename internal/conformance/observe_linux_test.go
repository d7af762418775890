package conformance

import (
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// denialLag is how long after its session's end a denial may still be
// recorded: not at all, seccomp user notification reports the attempt while
// the call waits for the daemon's answer.
const denialLag time.Duration = 0

// mustObserve are the denial sources every host of this OS observes: none
// here, seccomp user notification may be missing, and the enforcement
// report then says so.
var mustObserve []string

func denialCases(addr string) []denialCase {
	return []denialCase{
		{"write outside the write roots", nil, []string{"/bin/sh", "-c", "echo x > /etc/blocked"},
			&sandboxdv1.Denial{Field: "filesystem.write", Target: "/etc/blocked", Command: "sh"}},
		{"connect to the host's loopback under network none", netPolicy(sandboxdv1.Network_NONE), []string{suite.probe, "tcp-connect", addr},
			&sandboxdv1.Denial{Field: "network.mode", Operation: "connect", Target: addr, Command: "probe"}},
		{"terminal injection", nil, []string{suite.probe, "tiocsti"},
			&sandboxdv1.Denial{Field: "process", Operation: "ioctl", Target: "TIOCSTI", Command: "probe"}},
	}
}

// wantDenial is the denial c must have recorded in the session res
// describes, and what matches it.
func wantDenial(c denialCase, res *client.Result) (*sandboxdv1.Denial, func(*sandboxdv1.Denial) bool) {
	want := c.want
	if want.Operation == "connect" && res.Enforcement.GetMechanismSet() == "landlock" {
		// Without a network namespace there is no private loopback to
		// connect in: socket() itself is refused, before any address is
		// named.
		want = &sandboxdv1.Denial{Field: "network.mode", Operation: "socket", Target: "AF_INET", Command: want.Command}
	}
	return want, func(d *sandboxdv1.Denial) bool {
		return d.GetField() == want.Field && d.GetTarget() == want.Target && d.GetCommand() == want.Command &&
			(want.Operation == "" || d.GetOperation() == want.Operation) && d.GetPid() > 0 && d.GetHostPid() > 0 && d.GetTime() != nil
	}
}
