// Package launcherlinux is the Linux sandbox backend. It turns a policy into a
// plan (mounts, Landlock rules, a seccomp program, an enforcement report) with
// pure functions that are tested on every OS, and applies the plan with a
// re-exec of the daemon binary as the sandbox's init (pid 1 of new user,
// mount, pid, ipc, uts, cgroup and usually net namespaces), which then
// execs a second stage in a nested user namespace that restricts itself with
// no_new_privs, Landlock and seccomp and finally execs the command.
//
// Process tree inside the sandbox:
//
//	sandboxd-init (pid 1, uid 0 of the outer user ns = the sandbox's host uid)
//	└── command (pid 2, the sandbox uid in an inner user ns, no capabilities)
package launcherlinux
