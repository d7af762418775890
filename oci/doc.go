// Package oci converts between sandboxd policies and OCI runtime-spec
// configs, so that a sandbox can leave sandboxd for runc, crun or any
// node of a cluster with the same enforcement, and an OCI config can be
// run by sandboxd.
//
// Export goes through the Linux backend's own planner: the mounts are
// launcherlinux.BuildPlan's steps for the namespaces set, each written as
// the OCI mount (or masked or read-only path) that does the same, and the
// seccomp filter is launcherlinux.SeccompRulesFor, read from the tables
// the backend's BPF program is built from. What no OCI field can say is
// refused with the policy field named (*Refusal), never dropped:
//
//	filesystem.read LISTED   sandboxd refuses it too
//	network.allow            the allowlist is the daemon's proxy
//	children.allow           the session socket is the daemon's
//	limits.timeout           OCI has no wall-clock limit
//	limits.output_bytes      the daemon counts output
//
// Two things differ by necessity and are not weaker. OCI runtimes set
// the container up as its root, so user namespaces must map container
// uid 0: the export maps only that, to the sandbox uid, and runs the
// command as it, without capabilities and with no_new_privs. On the host
// the command is the sandbox uid and nothing else, as under sandboxd;
// inside it sees itself as uid 0 of a namespace that has no other. And
// Landlock, which OCI has no field for, is in the namespaces set a second
// layer under the mounts, which alone already refuse what it refuses.
//
// Import reads a config back into a policy and a command. It takes what
// sandboxd enforces and refuses, with the JSON path, whatever sandboxd
// would have to ignore: hooks, devices, capabilities, a filter that
// refuses more than sandboxd's, unknown fields.
package oci
