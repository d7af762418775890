package daemon

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
)

// A session refused in a loop leaves the audit log to the others: past its
// limit its denials are counted and summed up, not written one by one, so
// they rotate no other session's records out of the log and push no
// watcher behind; its start and end are written all the same.
func TestDenialFloodLeavesOtherSessionsInTheAuditLog(t *testing.T) {
	state := t.TempDir()
	// Six files of 64 KiB: a few hundred denial lines would rotate them.
	h := startDaemon(t, func(c *Config) { c.StateDir = state; c.AuditMaxBytes = 64 << 10 })
	other := h.open(cmd("/bin/sleep", "30"))
	other.waitStarted()
	flood := h.open(cmd("/bin/sleep", "30"))
	flood.waitStarted()
	otherID, floodID := other.started.GetSessionId(), flood.started.GetSessionId()
	h.svc.mu.Lock()
	sess := h.svc.sessions[floodID]
	h.svc.mu.Unlock()
	w := h.svc.events.subscribe()
	defer h.svc.events.unsubscribe(w)

	const n = 100000
	began := time.Now()
	for i := range n {
		sess.denied(&sandboxdv1.Denial{Field: "filesystem.deny", Operation: "open", Target: fmt.Sprintf("/secret/%d", i), Pid: 2})
	}
	took := time.Since(began)
	select {
	case <-w.behind:
		t.Error("a watcher fell behind on one session's denials")
	default:
	}
	info, err := h.client.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: floodID})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetDenialCount() != n {
		t.Errorf("denial_count %d, want %d: the ones not recorded still count", info.GetDenialCount(), n)
	}
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: floodID}); err != nil {
		t.Fatal(err)
	}
	flood.finish()

	var recorded, suppressed, summaries uint64
	var otherStart, floodEnd bool
	err = auditlog.Read(state, func(line []byte) error {
		var r struct {
			Session string `json:"session"`
			Type    string `json:"type"`
			To      string `json:"to"`
			Count   uint64 `json:"count"`
			Denial  *struct {
				Target string `json:"target"`
			} `json:"denial"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		switch {
		case r.Session == otherID && r.Type == "state" && r.To == "starting":
			otherStart = true
		case r.Session == floodID && r.Type == "state" && r.To == "killed":
			floodEnd = true
		case r.Session == floodID && r.Type == "denial":
			recorded++
		case r.Session == floodID && r.Type == "denials-suppressed":
			summaries++
			suppressed += r.Count
			if r.Denial == nil || r.Denial.Target == "" {
				t.Errorf("a summary without the last denial: %s", line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !otherStart || !floodEnd {
		t.Errorf("the other session's start in the log %v, the flooding session's end %v; want both", otherStart, floodEnd)
	}
	if most := uint64(denialBurst + denialRate*(took.Seconds()+1)); recorded > most {
		t.Errorf("%d denials written one by one in %v, want at most %d", recorded, took, most)
	}
	if summaries == 0 || recorded+suppressed != n {
		t.Errorf("%d denials written and %d summed up in %d records, want %d in all", recorded, suppressed, summaries, n)
	}
}
