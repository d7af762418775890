// Package conformance is the cross-backend suite: it builds sandboxd,
// sandboxctl and the probe, starts a real daemon on a real socket, and runs
// the probe inside real sandboxes, each case on the plain exec path and on
// the PTY path, asserting both match what the policy allows. Cases are named
// after what must not happen ("cannot write outside write roots"), the way
// bubblewrap names its tests.
//
// The suite runs on Linux and on macOS. On macOS the daemon's one mechanism
// set is seatbelt: no namespaces, so sandboxes see the host's paths, pids
// and network interfaces, and the suite builds its fixtures at their
// resolved paths (/var/tmp is /private/var/tmp there). A case whose
// outcome differs there says so (darwinWants: no private loopback under
// network NONE); a case that tries what only one OS has (/proc, TIOCSTI,
// kern.procargs2) is skipped on the other with the reason; denials, which
// macOS reports through the unified log, may be recorded seconds after
// the attempt. The macOS suite runs natively in CI only; elsewhere it is
// compiled: CGO_ENABLED=0 GOOS=darwin go vet ./internal/conformance/...
//
// Network ALLOWLIST cases reach servers the suite starts on the host's
// 127.0.0.1 and [::1] by names only the daemon's proxy knows: the suite
// writes a hosts file (proxy-hosts under its root) mapping allowed.test,
// other.test, wild.test and a.wild.test to 127.0.0.1 and starts the daemon
// with --proxy-hosts FILE (when the built sandboxd has that flag). The
// sandbox itself cannot reach those servers but through the proxy, which
// is at 127.0.0.1:3128 in its own network namespace.
//
// Limits cases set small limits (64 tasks, 64 MiB, a fifth of a CPU,
// 100000 output bytes) and run a fork bomb, a memory hog, a CPU spin and an
// output flood from the probe; the fork bomb never holds more than 2000
// children, so a missing limit fails the case without taking the host down.
//
// TestOCIBundles (Linux, as root) runs the filesystem, network and
// process cases an OCI config can express in bundles written by
// sandboxctl export-oci, under runc and crun, and compares each step with
// sandboxd's own session of the same case and with sandboxctl run --oci of
// the config. A runtime that refuses the host itself (crun 1.8.1 on hybrid
// cgroups) is skipped with what it said.
//
// The suite needs no root: run as an unprivileged user, it starts the daemon
// as that user, which then builds its sandboxes (on Linux from unprivileged
// user namespaces). scripts/rootless-test.sh runs it that way on Linux.
//
// Environment:
//
//	SANDBOXD_CONFORMANCE_BIN       directory with prebuilt sandboxd, sandboxctl,
//	                               probe and, on Linux, hostsim (otherwise
//	                               go build)
//	SANDBOXD_CONFORMANCE_DIR       where fixtures live (default /var/tmp:
//	                               Linux sandboxes get a private /tmp)
//	SANDBOXD_CONFORMANCE_ROOT_OWNED_DIR
//	                               run as an unprivileged user, a directory
//	                               prepared by root for the cases about
//	                               root-owned files (see rootOwnedEnv)
//	SANDBOXD_CONFORMANCE_MECHANISM force the daemon's mechanism set
//	                               (--mechanism namespaces|landlock; Linux
//	                               only, macOS has one)
//	SANDBOXD_CONFORMANCE_WRAP      command the daemon runs under, to simulate
//	                               a degraded host, e.g. "hostsim --deny
//	                               userns --" (hostsim, Linux's, is the
//	                               built one)
//	SANDBOXD_DEGRADED_TABLE        file TestDegradedHosts (Linux) writes its
//	                               table to
//	SANDBOXD_CONFORMANCE_NO_CGROUP 1: this host gives the daemon no cgroup
//	                               (a rootless daemon without a delegated
//	                               subtree), so the cases of
//	                               limits.memory_bytes, limits.pids and
//	                               limits.cpu_millis accept a structured
//	                               refusal of their field instead. Default
//	                               off: anywhere else, root or rootless
//	                               (scripts/rootless-test.sh delegates a
//	                               cgroup), they must be enforced, and a
//	                               refusal fails them
//
// On a Linux host where the namespaces set is incomplete, a case's policy
// may be refused with a structured reason instead of run; with the landlock
// set forced, exactly the cases that name a landlockRefuses field must be.
// On macOS no case's policy may be refused but those naming a
// darwinRefuses field (the allowlist and the cgroup limits), which must be.
// A cgroup limit is never refused without SANDBOXD_CONFORMANCE_NO_CGROUP.
package conformance
