// Package conformance is the cross-backend suite: it builds sandboxd,
// sandboxctl and the probe, starts a real daemon on a real socket, and runs
// the probe inside real sandboxes, each case on the plain exec path and on
// the PTY path, asserting both match what the policy allows. Cases are named
// after what must not happen ("cannot write outside write roots"), the way
// bubblewrap names its tests.
//
// The suite needs no root: run as an unprivileged user, it starts the daemon
// as that user, which then builds sandboxes from unprivileged user
// namespaces. scripts/rootless-test.sh runs it that way.
//
// Environment:
//
//	SANDBOXD_CONFORMANCE_BIN       directory with prebuilt sandboxd, sandboxctl,
//	                               probe and hostsim (otherwise go build)
//	SANDBOXD_CONFORMANCE_DIR       where fixtures live (default /var/tmp:
//	                               sandboxes get a private /tmp)
//	SANDBOXD_CONFORMANCE_MECHANISM force the daemon's mechanism set
//	                               (--mechanism namespaces|landlock)
//	SANDBOXD_CONFORMANCE_WRAP      command the daemon runs under, to simulate
//	                               a degraded host, e.g. "hostsim --deny
//	                               userns --" (hostsim is the built one)
//	SANDBOXD_DEGRADED_TABLE        file TestDegradedHosts writes its table to
//
// On a host where the namespaces set is incomplete, a case's policy may be
// refused with a structured reason instead of run; with the landlock set
// forced, exactly the cases that name a landlockRefuses field must be.
package conformance
