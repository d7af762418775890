package daemon

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
)

// The move to RUNNING, whose audit line a launch writes after its Started,
// is in the log while the session runs on with nothing else happening (a
// command that neither waits nor prints): the launch flushes it, no later
// event has to.
func TestAuditRecordsTheMoveToRunningWhileTheSessionRuns(t *testing.T) {
	state := t.TempDir()
	h := startDaemon(t, func(c *Config) { c.StateDir = state })
	s := h.open(sh("while :; do :; done"))
	s.waitStarted()
	id := s.started.GetSessionId()
	running := func() bool {
		found := false
		err := auditlog.Read(state, func(line []byte) error {
			var r record.Event
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			found = found || r.Session == id && r.Type == "state" && r.To == "running"
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	for deadline := time.Now().Add(10 * time.Second); !running(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no running line for session %s in the audit log while it runs", id)
		}
	}
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if s.finish(); s.exit.GetState() != sandboxdv1.State_KILLED {
		t.Errorf("exit %v, %v", s.exit, s.err)
	}
}

// Close writes the summary of the denials not recorded that a timer would
// have written later, before it closes the audit log.
func TestCloseWritesPendingDenialSummariesToTheAuditLog(t *testing.T) {
	state := t.TempDir()
	svc, err := New(Config{Backend: &fakeBackend{}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	for range denialBurst + 3 {
		svc.events.publish(denialEvent("0123456789abcdef", ""), nil)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	var recorded, summed uint64
	err = auditlog.Read(state, func(line []byte) error {
		var r record.Event
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		switch r.Type {
		case "denial":
			recorded++
		case "denials-suppressed":
			summed += r.Count
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if summed == 0 || recorded+summed != denialBurst+3 {
		t.Errorf("the audit log has %d denials and %d summed up, want %d in all", recorded, summed, denialBurst+3)
	}
}
