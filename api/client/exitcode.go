package client

import (
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Exit codes of sandboxctl run that are not the command's own.
const (
	ExitDaemonFailed = 125 // the daemon refused or failed, or the connection broke
	ExitCannotExec   = 126 // the command could not be executed
	ExitNotFound     = 127 // the command was not found
	exitSignalBase   = 128 // 128+N: killed by signal N
	sigkill          = 9
)

// ExitCode maps the outcome of Run or Attach to an exit code, the one
// sandboxctl run exits with (docs/sessions.md, "Exit codes of sandboxctl run"): the
// command's own code; 125 for any error, refusal or lost connection; 126
// or 127 when the command failed to start; 128+N when signal N killed it;
// 0 when the client detached from a session that went on running, since
// that is what it asked for.
func ExitCode(res *Result, err error) int {
	if err != nil || res == nil {
		return ExitDaemonFailed
	}
	if res.Exit == nil {
		if res.Detached {
			return 0
		}
		return ExitDaemonFailed
	}
	e := res.Exit
	switch e.GetState() {
	case sandboxdv1.State_FAILED_TO_START:
		if c := e.GetExitCode(); c == ExitCannotExec || c == ExitNotFound {
			return int(c)
		}
		// Failing to start for any other reason is the daemon's failure,
		// not something the command did.
		return ExitDaemonFailed
	case sandboxdv1.State_EXITED:
		if s := e.GetSignal(); s > 0 {
			return exitSignalBase + int(s)
		}
		return int(e.GetExitCode())
	case sandboxdv1.State_KILLED:
		if s := e.GetSignal(); s > 0 {
			return exitSignalBase + int(s)
		}
		// The daemon ends a sandbox (timeout, limit, operator) with SIGKILL.
		return exitSignalBase + sigkill
	default:
		return ExitDaemonFailed
	}
}

// UnenforceableFrom returns the Unenforceable detail of a refusal, or nil
// when err carries none.
func UnenforceableFrom(err error) *sandboxdv1.Unenforceable {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil
	}
	for _, d := range st.Details() {
		if u, ok := d.(*sandboxdv1.Unenforceable); ok {
			return u
		}
	}
	return nil
}
