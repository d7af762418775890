// Package pty is the terminal plumbing shared by the daemon and backends:
// allocate a pseudo-terminal pair, resize it, and keep recent output for a
// later attach. It never starts a process; a PTY session differs from a plain
// one only in which files the backend is handed as stdio.
package pty
