// Package hostsim simulates a degraded Linux host for tests: it installs a
// seccomp filter that makes chosen kernel primitives (user namespaces,
// Landlock, seccomp, mounting, bringing up loopback, ...) fail, then runs a
// command under it. Filters survive fork and execve, so a sandboxd daemon
// started this way, and every sandbox it launches, sees a host where those
// primitives are missing or forbidden, without mocking anything in sandboxd.
//
// The command is cmd/hostsim:
//
//	hostsim --deny userns,landlock [--errno EPERM] -- sandboxd ...
//
// Denial names are listed by Names. The filter is built for amd64 and
// arm64; elsewhere the package builds but refuses to run.
package hostsim
