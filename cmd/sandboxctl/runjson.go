package main

import (
	"encoding/json"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
)

// runStatus is how a session run by sandboxctl run ended, as run --json
// prints it: what the exit code alone cannot say (killed by whom, refused
// for which field) without parsing stderr.
type runStatus struct {
	SessionID    string `json:"session_id,omitempty"`
	PolicyDigest string `json:"policy_digest,omitempty"`
	// State is the session's last state ("exited", "killed",
	// "failed-to-start"), "running" for a session left detached, and
	// empty when none was started.
	State    string `json:"state,omitempty"`
	Detached bool   `json:"detached,omitempty"`
	// ExitCode is sandboxctl's own exit code: the command's, or 125, 126,
	// 127, 128+N.
	ExitCode int    `json:"exit_code"`
	Signal   int32  `json:"signal,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
	// Refusal is the daemon's Unenforceable detail, with proto field names.
	Refusal json.RawMessage `json:"refusal,omitempty"`
}

func runStatusOf(res *client.Result, err error, code int) runStatus {
	st := runStatus{ExitCode: code}
	if res != nil {
		st.SessionID, st.PolicyDigest, st.Detached = res.SessionID, res.Digest, res.Detached
		if e := res.Exit; e != nil {
			st.State, st.Signal, st.Reason = client.StateName(e.GetState()), e.GetSignal(), e.GetReason()
		} else if res.Detached {
			st.State = "running"
		}
	}
	if err != nil {
		st.Error = err.Error()
		if u := client.UnenforceableFrom(err); u != nil {
			// An Unenforceable always marshals; were it not to, the
			// error above still says what was refused.
			st.Refusal, _ = protojson.MarshalOptions{UseProtoNames: true}.Marshal(u)
		}
	}
	return st
}

// lastByteWriter remembers whether what went through it ended a line, so
// that the status can be the whole last line of stdout whatever the
// command printed before it.
type lastByteWriter struct {
	w    io.Writer
	last byte
}

func (l *lastByteWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

func (l *lastByteWriter) writeStatus(st runStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding the status: %w", err)
	}
	if l.last != 0 && l.last != '\n' {
		b = append([]byte{'\n'}, b...)
	}
	_, err = l.w.Write(append(b, '\n'))
	return err
}
