package conformance

import (
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// denialLag is how long after its session's end a denial may still be
// recorded: the unified log delivers Seatbelt's reports asynchronously,
// seconds after the fact on a busy host.
const denialLag = 20 * time.Second

// mustObserve are the denial sources every Mac observes: Seatbelt reports
// every violation of a profile to the unified log.
var mustObserve = []string{"filesystem.write", "filesystem.read", "network.mode", "process"}

// denialCases: the target is what Seatbelt reports, the path or the
// address; the operation is Seatbelt's name for it (file-write-create,
// network-outbound), so only its presence is checked.
func denialCases(addr string) []denialCase {
	return []denialCase{
		{"write outside the write roots", nil, []string{"/bin/sh", "-c", "echo x > /etc/blocked"},
			&sandboxdv1.Denial{Field: "filesystem.write", Target: "/etc/blocked"}},
		{"connect to the host's loopback under network none", netPolicy(sandboxdv1.Network_NONE), []string{suite.probe, "tcp-connect", addr},
			&sandboxdv1.Denial{Field: "network.mode", Target: addr}},
	}
}

// wantDenial is the denial c must have recorded, and what matches it.
func wantDenial(c denialCase, _ *client.Result) (*sandboxdv1.Denial, func(*sandboxdv1.Denial) bool) {
	return c.want, func(d *sandboxdv1.Denial) bool {
		return d.GetField() == c.want.Field && sameTarget(d.GetTarget(), c.want.Target) && d.GetOperation() != ""
	}
}
