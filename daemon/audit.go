package daemon

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
)

// auditRecord is one line of the audit log: the event as watchers see it
// (record.Event), plus what an auditor needs and a watcher does not:
// who started the session, the full policy and what enforced it. Never the
// session's output.
type auditRecord struct {
	*record.Event
	Caller        *auditCaller    `json:"caller,omitempty"`
	Policy        json.RawMessage `json:"policy,omitempty"`
	PolicyDigest  string          `json:"policy_digest,omitempty"`
	Cwd           string          `json:"cwd,omitempty"`
	TTY           bool            `json:"tty,omitempty"`
	Enforcement   json.RawMessage `json:"enforcement,omitempty"`
	LaunchSeconds float64         `json:"launch_seconds,omitempty"`
	RefusedField  string          `json:"refused_field,omitempty"`
}

type auditCaller struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	PID int32  `json:"pid"`
	// SID and Admin are the Windows caller's (see Caller).
	SID   string `json:"sid,omitempty"`
	Admin bool   `json:"admin,omitempty"`
	// Session is the parent session on whose socket a child was asked for.
	Session string `json:"session,omitempty"`
}

// daemonRecord marks the daemon starting and stopping, so that a reader
// can tell a session the log never saw end from one that ended with the
// daemon.
type daemonRecord struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"` // "daemon"
	Event  string    `json:"event"`
	PID    int       `json:"pid"`
	Socket string    `json:"socket,omitempty"`
}

// suppressedRecord sums up a session's denials that were not recorded
// (denialRate): how many, from when to when, and the last of them.
type suppressedRecord struct {
	Time    time.Time      `json:"time"`
	Session string         `json:"session"`
	Parent  string         `json:"parent,omitempty"`
	Type    string         `json:"type"` // "denials-suppressed"
	Count   uint64         `json:"count"`
	First   time.Time      `json:"first"`
	Last    time.Time      `json:"last"`
	Denial  *record.Denial `json:"denial"`
}

func newSuppressedRecord(ev *sandboxdv1.Event, sum *denialSummary) *suppressedRecord {
	last := record.FromEvent(&sandboxdv1.Event{Kind: &sandboxdv1.Event_Denial{Denial: sum.latest}})
	return &suppressedRecord{
		Time: ev.GetTime().AsTime(), Session: ev.GetSessionId(), Parent: ev.GetParentId(), Type: "denials-suppressed",
		Count: sum.count, First: sum.first, Last: sum.last, Denial: last.Denial,
	}
}

// auditSink writes every event to log, and the sums of the denials past
// their session's limit instead of them. A failed write is reported through
// logf, once until writes succeed again: the sessions go on, and the
// daemon's own log says the trail has a gap. A failed rotation loses
// nothing (the record is appended anyway) and is reported once too.
func auditSink(log *auditlog.Log, logf func(string, ...any), health func(error)) eventSink {
	report := reportFunc(logf, health)
	// The sink runs under the event bus's lock: these are its alone.
	var (
		cache protoJSONCache
		line  []byte
	)
	return func(ev *sandboxdv1.Event, d *eventDetail) {
		if d.unrecorded {
			return
		}
		if d.suppressed != nil {
			report(log.Write(newSuppressedRecord(ev, d.suppressed)))
			return
		}
		rec := &auditRecord{Event: record.FromEvent(ev), PolicyDigest: d.digest, Cwd: d.cwd, TTY: d.tty, RefusedField: d.refusedField}
		if c := d.caller; c != nil {
			rec.Caller = &auditCaller{UID: c.UID, GID: c.GID, PID: c.PID, SID: c.SID, Admin: c.Admin, Session: c.Session}
		}
		policyJSON, perr := cache.get(d.policy)
		enforcementJSON, eerr := cache.get(d.enforcement)
		rec.Policy, rec.Enforcement = policyJSON, enforcementJSON
		if d.launchLatency > 0 {
			rec.LaunchSeconds = d.launchLatency.Seconds()
		}
		var err error
		var ok bool
		if perr == nil && eerr == nil {
			line, ok = rec.appendJSON(line[:0])
		}
		if ok {
			line = append(line, '\n')
			err = log.WriteLine(line)
		} else {
			// encoding/json names what cannot be encoded.
			err = log.Write(rec)
		}
		report(err)
	}
}

// reportFunc returns what reports the outcome of each write of an audit
// sink: through logf, once until writes succeed again; and to health.
func reportFunc(logf func(string, ...any), health func(error)) func(error) {
	var failing error
	return func(err error) {
		if errors.Is(err, auditlog.ErrRotate) {
			// The record is in the file all the same.
			health(nil)
		} else {
			health(err)
		}
		switch {
		case err != nil && failing == nil && errors.Is(err, auditlog.ErrRotate):
			logf("audit log: %v; the file grows past its size limit until rotation works again", err)
		case err != nil && failing == nil:
			logf("audit log: %v; events are missing from it, and new sessions are refused, until writes succeed again", err)
		case err == nil && failing != nil:
			logf("audit log: writing again")
		}
		failing = err
	}
}

func protoJSON(m proto.Message) json.RawMessage {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

// auditDaemon records the daemon starting or stopping.
func (s *Service) auditDaemon(event string) {
	if s.audit == nil {
		return
	}
	if err := s.audit.Write(&daemonRecord{Time: time.Now().UTC(), Type: "daemon", Event: event, PID: os.Getpid(), Socket: s.cfg.SocketPath}); err != nil {
		s.logf("audit log: %v", err)
	}
}
