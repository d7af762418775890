package record

import sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"

// StateName is a state as sandboxctl, the audit log and the metrics spell
// it, e.g. "waiting-for-input".
func StateName(s sandboxdv1.State) string {
	switch s {
	case sandboxdv1.State_STARTING:
		return "starting"
	case sandboxdv1.State_RUNNING:
		return "running"
	case sandboxdv1.State_WAITING_FOR_INPUT:
		return "waiting-for-input"
	case sandboxdv1.State_WAITING:
		return "waiting"
	case sandboxdv1.State_WAITING_FOR_NETWORK:
		return "waiting-for-network"
	case sandboxdv1.State_EXITED:
		return "exited"
	case sandboxdv1.State_FAILED_TO_START:
		return "failed-to-start"
	case sandboxdv1.State_KILLED:
		return "killed"
	}
	return "unknown"
}
