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
// A session that may have children gets its own daemon socket bound at
// SessionSocketPath. In a private network namespace the command's seccomp
// filter hands every connect() to the daemon, which performs it on a
// duplicate of the command's socket (connect_linux.go): a unix socket
// reaches the session socket and nothing else of the host's.
//
// Process tree inside the sandbox:
//
//	sandboxd-init (pid 1, the sandbox uid, setup capabilities, not dumpable)
//	└── command (pid 2, the sandbox uid, no capabilities, restricted)
package launcherlinux
