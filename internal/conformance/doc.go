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
//	SANDBOXD_CONFORMANCE_BIN  directory with prebuilt sandboxd, sandboxctl
//	                          and probe (otherwise they are built with go build)
//	SANDBOXD_CONFORMANCE_DIR  where fixtures live (default /var/tmp: sandboxes
//	                          get a private /tmp, so fixtures cannot be there)
package conformance
