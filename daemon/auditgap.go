package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
)

// ErrAuditLog is wrapped by the refusal of a session whose start could not
// be recorded: the audit log promises every session, so none runs
// unrecorded.
var ErrAuditLog = errors.New("the audit log cannot be written; new sessions are refused until it can")

// reasonDaemonDied ends, in the audit log, a session that a daemon which
// died (kill -9, a crash, the host losing power) left without an end.
const reasonDaemonDied = "daemon died"

// auditHealth is the outcome of the audit log's latest write.
type auditHealth struct {
	mu  sync.Mutex
	err error
}

func (h *auditHealth) set(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

func (h *auditHealth) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// recordStart refuses the session just added when its start record, written
// as it was added (announce), is not in the audit log. Each Start tries
// again, so sessions run again as soon as the log can be written.
func (s *Service) recordStart() error {
	if s.audit == nil {
		return nil
	}
	if err := s.auditHealth.get(); err != nil {
		return fmt.Errorf("%w: %v", ErrAuditLog, err)
	}
	return nil
}

// closeOrphans writes the end a previous daemon never wrote: every
// session with a start record in log and no end record is recorded as
// killed, reason "daemon died". It returns their ids.
func closeOrphans(log *auditlog.Log, dir string) ([]string, error) {
	type open struct {
		parent, state string
		argv          []string
	}
	live := map[string]*open{}
	var order []string
	err := auditlog.Read(dir, func(line []byte) error {
		var r record.Event
		if json.Unmarshal(line, &r) != nil || r.Type != "state" || r.Session == "" {
			// Daemon records, denials, and lines of other writers
			// say nothing about whether a session ended.
			return nil
		}
		switch r.To {
		case record.StateName(sandboxdv1.State_EXITED), record.StateName(sandboxdv1.State_FAILED_TO_START), record.StateName(sandboxdv1.State_KILLED):
			delete(live, r.Session)
		default:
			o := live[r.Session]
			if o == nil {
				o = &open{parent: r.Parent}
				live[r.Session] = o
				order = append(order, r.Session)
			}
			o.state = r.To
			if len(r.Argv) > 0 {
				o.argv = r.Argv
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	order = slices.DeleteFunc(order, func(id string) bool { return live[id] == nil })
	now := time.Now().UTC()
	for _, id := range order {
		o := live[id]
		rec := &auditRecord{Event: &record.Event{
			Time: now, Session: id, Parent: o.parent, Type: "state", Argv: o.argv,
			From: o.state, To: record.StateName(sandboxdv1.State_KILLED), Reason: reasonDaemonDied,
		}}
		if err := log.Write(rec); err != nil {
			return nil, err
		}
	}
	return order, nil
}
