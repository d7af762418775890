package client

import (
	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// EventRecord is an Event as one JSON object (record.Event), the form
// `sandboxctl events --json` prints and the daemon's audit log builds on.
type EventRecord = record.Event

// DenialRecord is a Denial as JSON (record.Denial).
type DenialRecord = record.Denial

// Record turns an event into its JSON form.
func Record(ev *sandboxdv1.Event) *EventRecord { return record.FromEvent(ev) }

// StateName is a state as sandboxctl, the audit log and the metrics spell
// it, e.g. "waiting-for-input".
func StateName(s sandboxdv1.State) string { return record.StateName(s) }
