// Package launcherlinux is the Linux sandbox backend. It turns a policy into a
// plan (mounts, Landlock rules, a seccomp program, an enforcement report) with
// pure functions that are tested on every OS, and applies the plan with a
// re-exec of the daemon binary as the sandbox's init (pid 1 of new user,
// mount, pid, ipc, uts, cgroup and usually net namespaces). The init runs as
// the sandbox uid, the only uid of its user namespace, holding just the
// ambient capabilities it needs to build the root; it forks the command from
// a thread that has dropped every capability and restricted itself with
// no_new_privs, Landlock and seccomp.
//
// Where the host has seccomp user notification, the init hands the
// listener of the command's filter to the daemon (notify_linux.go), which
// answers three kinds of call: what the policy refuses (always EPERM,
// recorded as a denial), connect() in a private network namespace (the
// daemon performs it on a duplicate of the command's socket,
// connect_linux.go: a unix socket reaches the session socket, bound at
// SessionSocketPath for a session that may have children, and nothing else
// of the host's), and calls that may write a name, which the daemon judges
// against the plan's model of the filesystem (writemodel.go,
// fswrite_linux.go) to record a refusal before it lets the kernel carry
// them out.
//
// A root caller's write root that the sandbox uid could not write by its
// mode is bound ID-mapped, its owner shown as the sandbox uid: only the
// host's root may map a filesystem's owners, so the daemon clones the root
// into a detached mount mapped through a user namespace of its own
// (idmap_linux.go) and hands it to the init, which attaches it where a
// plain bind would go. Before it forks the command, the init checks, as the
// command will be, that every write root is writable and the cwd can be
// entered; the daemon turns a failure into a refusal that names the path,
// its owner and mode (writeroots_linux.go).
//
// Process tree inside the sandbox:
//
//	sandboxd-init (pid 1, the sandbox uid, setup capabilities, not dumpable)
//	└── command (the sandbox uid, no capabilities, restricted)
package launcherlinux
