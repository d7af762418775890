package launcher

import (
	"errors"
	"fmt"
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Unenforceable says that a policy field cannot be enforced on this host, by
// which mechanism it would need, what the probe found, and how to fix it.
type Unenforceable struct {
	// Field is the policy field path, e.g. "network.mode".
	Field string
	// Mechanism is what enforcing the field needs, e.g. "network namespace".
	Mechanism string
	// Found is what the host offered instead.
	Found string
	// Errno is the error the probe got, if any.
	Errno syscall.Errno
	// Probe names the operation that produced Errno, e.g. "unshare(CLONE_NEWNET)".
	Probe string
	// Remedy tells the operator what would make the field enforceable.
	Remedy string
}

func (u *Unenforceable) Error() string {
	msg := fmt.Sprintf("cannot enforce %s: needs %s", u.Field, u.Mechanism)
	if u.Found != "" {
		msg += "; found " + u.Found
	}
	if u.Probe != "" {
		msg += "; " + u.Probe
		if u.Errno != 0 {
			msg += ": " + u.Errno.Error()
		}
	}
	if u.Remedy != "" {
		msg += "; remedy: " + u.Remedy
	}
	return msg
}

// Proto is the wire form of u, attached to a FAILED_PRECONDITION status.
func (u *Unenforceable) Proto() *sandboxdv1.Unenforceable {
	p := &sandboxdv1.Unenforceable{
		Field:     u.Field,
		Mechanism: u.Mechanism,
		Found:     u.Found,
		Probe:     u.Probe,
		Remedy:    u.Remedy,
	}
	if u.Errno != 0 {
		p.Errno = errnoName(u.Errno)
	}
	return p
}

// ExecError is returned by Start when the sandbox was set up but the command
// could not be executed in it.
type ExecError struct {
	// Op is the step that failed: "execve", or "chdir" for the working
	// directory.
	Op    string
	Path  string
	Errno syscall.Errno
	// Hint says what in the sandbox made the path unusable, when known.
	Hint string
	// Reason, when set, is the whole account of why Path could not be
	// used (whose it is, its mode, the sandbox's uid), and what to do
	// about it: the errno alone would blame the command.
	Reason string
}

func (e *ExecError) Error() string {
	if e.Reason != "" {
		return e.Reason
	}
	msg := fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Errno)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// ExitCode is the shell convention: 127 not found, 126 cannot execute.
func (e *ExecError) ExitCode() int {
	if e.Op != "chdir" && (errors.Is(e.Errno, syscall.ENOENT) || errors.Is(e.Errno, syscall.ENOTDIR)) {
		return 127
	}
	return 126
}

var errnoNames = map[syscall.Errno]string{
	syscall.EPERM:      "EPERM",
	syscall.EACCES:     "EACCES",
	syscall.EINVAL:     "EINVAL",
	syscall.ENOSYS:     "ENOSYS",
	syscall.ENOSPC:     "ENOSPC",
	syscall.EOPNOTSUPP: "EOPNOTSUPP",
	syscall.ENOENT:     "ENOENT",
	syscall.EROFS:      "EROFS",
	syscall.EBUSY:      "EBUSY",
}

func errnoName(e syscall.Errno) string {
	if n, ok := errnoNames[e]; ok {
		return fmt.Sprintf("%s (%v)", n, e)
	}
	return fmt.Sprintf("errno %d (%v)", int(e), e)
}
