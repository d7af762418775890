// Package record is the JSON form of the daemon's events and the names of
// session states, shared by the audit log the daemon writes and by the
// clients that print events.
package record

import (
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Event is an Event as one JSON object, the form `sandboxctl events
// --json` prints and the daemon's audit log builds on: states are named as
// StateName spells them ("waiting-for-input"), times are RFC 3339.
type Event struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Session  string    `json:"session"`
	Parent   string    `json:"parent,omitempty"`
	Type     string    `json:"type"` // "state", "denial" or, in the audit log, "denials-suppressed"
	Snapshot bool      `json:"snapshot,omitempty"`
	Argv     []string  `json:"argv,omitempty"`

	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Reason   string `json:"reason,omitempty"`
	ExitCode *int32 `json:"exit_code,omitempty"`
	Signal   int32  `json:"signal,omitempty"`

	Denial *Denial `json:"denial,omitempty"`

	// Count, First and Last are set on a "denials-suppressed" record of
	// the audit log: how many of the session's denials were not recorded
	// one by one (the daemon's rate limit), from when to when; Denial is
	// the last of them.
	Count uint64     `json:"count,omitempty"`
	First *time.Time `json:"first,omitempty"`
	Last  *time.Time `json:"last,omitempty"`
}

// Denial is a Denial as JSON.
type Denial struct {
	Field     string `json:"field"`
	Operation string `json:"operation"`
	Target    string `json:"target,omitempty"`
	Pid       int32  `json:"pid"`
	HostPid   int32  `json:"host_pid,omitempty"`
	Command   string `json:"command,omitempty"`
	Errno     string `json:"errno,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// FromEvent turns an event into its JSON form.
func FromEvent(ev *sandboxdv1.Event) *Event {
	r := &Event{
		Seq:      ev.GetSeq(),
		Time:     ev.GetTime().AsTime(),
		Session:  ev.GetSessionId(),
		Parent:   ev.GetParentId(),
		Snapshot: ev.GetSnapshot(),
		Argv:     ev.GetArgv(),
	}
	if ev.GetTime() == nil {
		r.Time = time.Time{}
	}
	switch {
	case ev.GetState() != nil:
		st := ev.GetState()
		r.Type = "state"
		if st.GetFrom() != sandboxdv1.State_STATE_UNSPECIFIED {
			r.From = StateName(st.GetFrom())
		}
		r.To = StateName(st.GetTo())
		r.Reason = st.GetReason()
		if st.GetTo() == sandboxdv1.State_EXITED || st.GetTo() == sandboxdv1.State_FAILED_TO_START {
			code := st.GetExitCode()
			r.ExitCode = &code
		}
		r.Signal = st.GetSignal()
	case ev.GetDenial() != nil:
		d := ev.GetDenial()
		r.Type = "denial"
		r.Denial = &Denial{
			Field: d.GetField(), Operation: d.GetOperation(), Target: d.GetTarget(),
			Pid: d.GetPid(), HostPid: d.GetHostPid(), Command: d.GetCommand(), Errno: d.GetErrno(),
			Detail: d.GetDetail(),
		}
	}
	return r
}
