package daemon

import (
	"fmt"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// transitions lists, per state, the states a session may move to. Terminal
// states have no entry. Checking every move catches a second exit path (a
// kill racing a normal exit) overwriting the first instead of being noticed.
var transitions = map[sandboxdv1.State][]sandboxdv1.State{
	sandboxdv1.State_STARTING:            {sandboxdv1.State_RUNNING, sandboxdv1.State_FAILED_TO_START, sandboxdv1.State_KILLED},
	sandboxdv1.State_RUNNING:             {sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_WAITING, sandboxdv1.State_WAITING_FOR_NETWORK, sandboxdv1.State_EXITED, sandboxdv1.State_KILLED},
	sandboxdv1.State_WAITING_FOR_INPUT:   {sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING, sandboxdv1.State_WAITING_FOR_NETWORK, sandboxdv1.State_EXITED, sandboxdv1.State_KILLED},
	sandboxdv1.State_WAITING:             {sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_WAITING_FOR_NETWORK, sandboxdv1.State_EXITED, sandboxdv1.State_KILLED},
	sandboxdv1.State_WAITING_FOR_NETWORK: {sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_WAITING, sandboxdv1.State_EXITED, sandboxdv1.State_KILLED},
}

func checkTransition(from, to sandboxdv1.State) error {
	for _, next := range transitions[from] {
		if next == to {
			return nil
		}
	}
	return fmt.Errorf("invalid session state transition %s -> %s", from, to)
}

func terminal(s sandboxdv1.State) bool {
	return len(transitions[s]) == 0
}

// live says whether a session in state s has a command that runs: it can
// be signalled, killed and given input.
func live(s sandboxdv1.State) bool {
	switch s {
	case sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT, sandboxdv1.State_WAITING, sandboxdv1.State_WAITING_FOR_NETWORK:
		return true
	}
	return false
}
