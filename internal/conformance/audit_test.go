package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
)

// auditLine is what the tests read of an audit log line.
type auditLine struct {
	Type     string   `json:"type"`
	Event    string   `json:"event"`
	Session  string   `json:"session"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Argv     []string `json:"argv"`
	Reason   string   `json:"reason"`
	ExitCode *int32   `json:"exit_code"`
	Caller   *struct {
		UID uint32 `json:"uid"`
		PID int32  `json:"pid"`
	} `json:"caller"`
	Policy       json.RawMessage `json:"policy"`
	PolicyDigest string          `json:"policy_digest"`
	Enforcement  json.RawMessage `json:"enforcement"`
	Denial       *struct {
		Field     string `json:"field"`
		Operation string `json:"operation"`
		Target    string `json:"target"`
		Errno     string `json:"errno"`
	} `json:"denial"`
	raw string
}

// readAudit reads every line of the audit log in dir; each must be a JSON
// object.
func readAudit(t *testing.T, dir string) []auditLine {
	t.Helper()
	var out []auditLine
	err := auditlog.Read(dir, func(line []byte) error {
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		l.raw = string(line)
		out = append(out, l)
		return nil
	})
	if err != nil {
		t.Fatalf("read audit log %s: %v", dir, err)
	}
	return out
}

// TestAuditLog: a session's start (caller, full policy), its running
// (enforcement report), its denials and its end are lines of the audit
// log, each a JSON object, and nothing the session printed is.
func TestAuditLog(t *testing.T) {
	outcomeHere(t)
	requireDaemon(t)
	secret := "secret-" + randomHex()
	s := run(t, commandStart(false, nil, nil, "/bin/sh", "-c", "echo "+secret+"; echo x > /etc/audit-blocked; exit 3"), nil)
	if s.err != nil || !strings.Contains(s.stdout, secret) {
		t.Fatalf("session: %v\n%s", s.err, s)
	}
	id := s.res.SessionID
	observed := denialsObserved(t)
	var lines []auditLine
	deadline := time.Now().Add(10*time.Second + denialLag)
	for {
		lines = readAudit(t, suite.daemon.state)
		var ended, denied bool
		for _, l := range lines {
			ended = ended || (l.Session == id && l.To == "exited")
			denied = denied || (l.Session == id && blockedDenial(l))
		}
		// A denial that arrives late may follow the end.
		if ended && (denialLag == 0 || denied || !observed) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var starting, running, denial, exited bool
	for _, l := range lines {
		if strings.Contains(l.raw, secret) && l.Session == id && !strings.Contains(strings.Join(l.Argv, " "), secret) {
			t.Errorf("the session's output is in the audit log: %s", l.raw)
		}
		if l.Session != id {
			continue
		}
		switch {
		case l.Type == "state" && l.To == "starting":
			starting = l.Caller != nil && l.Caller.UID == uint32(os.Getuid()) && l.Caller.PID == int32(os.Getpid()) &&
				len(l.Policy) > 2 && strings.HasPrefix(l.PolicyDigest, "sha256:") && len(l.Argv) == 3
		case l.Type == "state" && l.To == "running":
			running = bytes.Contains(l.Enforcement, []byte(`"filesystem.write"`)) && bytes.Contains(l.Enforcement, []byte(`"denial_sources"`))
		case l.Type == "denial":
			denial = denial || blockedDenial(l)
		case l.Type == "state" && l.To == "exited":
			exited = l.ExitCode != nil && *l.ExitCode == 3
		}
	}
	if !starting || !running || !exited || (observed && !denial) {
		var b strings.Builder
		for _, l := range lines {
			if l.Session == id {
				b.WriteString(l.raw + "\n")
			}
		}
		t.Errorf("audit log of %s: starting with caller and policy %v, running with enforcement %v, denial %v (observed here: %v), exited 3 %v:\n%s",
			id, starting, running, denial, observed, exited, b.String())
	}
}

// blockedDenial says whether l records TestAuditLog's write to
// /etc/audit-blocked.
func blockedDenial(l auditLine) bool {
	return l.Type == "denial" && l.Denial != nil && sameTarget(l.Denial.Target, "/etc/audit-blocked") && l.Denial.Field == "filesystem.write"
}

// TestAuditLogSurvivesRestart: a daemon restarted on the same state
// directory appends to the log its predecessor wrote.
func TestAuditLogSurvivesRestart(t *testing.T) {
	outcomeHere(t)
	requireDaemon(t)
	dir := filepath.Join(suite.root, "restart")
	var ids []string
	for range 2 {
		d, err := startDaemon(dir)
		if err != nil {
			t.Fatal(err)
		}
		c := dialDaemon(t, d)
		res := runOn(t, c, commandStart(false, nil, nil, trueCmd))
		ids = append(ids, res.SessionID)
		c.Close()
		d.stop()
	}
	lines := readAudit(t, filepath.Join(dir, "state"))
	started, stopped := 0, 0
	ends := map[string]bool{}
	for _, l := range lines {
		if l.Type == "daemon" {
			switch l.Event {
			case "started":
				started++
			case "stopped":
				stopped++
			}
		}
		if l.To == "exited" {
			ends[l.Session] = true
		}
	}
	// A wrapper such as bwrap does not pass SIGTERM on: the daemon under
	// it dies without stopping, and records no stop.
	wantStopped := 2
	if len(suite.wrap) > 0 {
		wantStopped = stopped
	}
	if started != 2 || stopped != wantStopped || !ends[ids[0]] || !ends[ids[1]] {
		t.Errorf("daemon started %d, stopped %d; ends %v of %v", started, stopped, ends, ids)
	}
}

// TestMetrics: the metrics endpoint serves the Prometheus text format,
// strictly parsed, with sessions by state, launches, launch latency,
// refusals and denials by field.
func TestMetrics(t *testing.T) {
	outcomeHere(t)
	requireDaemon(t)
	if s := run(t, commandStart(false, nil, nil, "/bin/sh", "-c", "echo x > /etc/metrics-blocked"), nil); s.err != nil {
		t.Fatalf("session: %v", s.err)
	}
	// A policy this OS's backend always refuses, for a refusal to count.
	refusedField, refused := "filesystem.read", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_LISTED, ReadRoots: list("/usr")}}
	if runtime.GOOS == "darwin" {
		refusedField, refused = "network.allow", allowPolicy(allowEntry("example.com", 443))
	}
	if s := run(t, commandStart(false, refused, nil, "/bin/true"), nil); client.UnenforceableFrom(s.err).GetField() != refusedField {
		t.Fatalf("want a refusal for %s, got %v", refusedField, s.err)
	}
	url := metricsURL(t, suite.daemon)
	fams := scrape(t, url)
	for name, typ := range map[string]string{
		"sandboxd_sessions": "gauge", "sandboxd_launches_total": "counter", "sandboxd_launch_duration_seconds": "histogram",
		"sandboxd_refusals_total": "counter", "sandboxd_denials_total": "counter",
	} {
		if f := fams[name]; f == nil || strings.ToLower(f.GetType().String()) != typ || f.GetHelp() == "" {
			t.Errorf("family %s: %v, want a %s with help", name, f, typ)
		}
	}
	// The Go runtime's and the process's collectors are there too.
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	value := func(fam, name string, labels map[string]string) float64 {
		for _, m := range fams[fam].GetMetric() {
			match := true
			for k, v := range labels {
				match = match && slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v })
			}
			if !match {
				continue
			}
			switch {
			case name == fam+"_count" && m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	if v := value("sandboxd_refusals_total", "sandboxd_refusals_total", map[string]string{"field": refusedField}); v < 1 {
		t.Errorf("refusals of %s %v", refusedField, v)
	}
	if v := value("sandboxd_launches_total", "sandboxd_launches_total", map[string]string{"result": "started"}); v < 1 {
		t.Errorf("launches started %v", v)
	}
	if v := value("sandboxd_launch_duration_seconds", "sandboxd_launch_duration_seconds_count", nil); v < 1 {
		t.Errorf("launch latency count %v", v)
	}
	if v := value("sandboxd_sessions", "sandboxd_sessions", map[string]string{"state": "exited"}); v < 1 {
		t.Errorf("exited sessions %v", v)
	}
	if v := value("sandboxd_sessions", "sandboxd_sessions", map[string]string{"state": "waiting-for-input"}); v < 0 {
		t.Errorf("no waiting-for-input series")
	}
	if denialsObserved(t) {
		denials := func() float64 {
			return value("sandboxd_denials_total", "sandboxd_denials_total", map[string]string{"field": "filesystem.write"})
		}
		// A denial may be counted late.
		for deadline := time.Now().Add(denialLag); denials() < 1 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			fams = scrape(t, url)
		}
		if v := denials(); v < 1 {
			t.Errorf("filesystem.write denials %v", v)
		}
	}
}

// scrape reads the metrics at url, which must be in the Prometheus text
// format, strictly parsed.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

var metricsLine = regexp.MustCompile(`metrics on (http://\S+/metrics)`)

// metricsURL is where d serves its metrics, from its log.
func metricsURL(t *testing.T, d *daemonProc) string {
	t.Helper()
	b, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	m := metricsLine.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no metrics address in the daemon's log:\n%s", b)
	}
	return string(m[1])
}

func dialDaemon(t *testing.T, d *daemonProc) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatalf("dial %s: %v", d.socket, err)
	}
	return c
}

// runOn runs start to its end on c's daemon; it must exit 0.
func runOn(t *testing.T, c *client.Client, start *sandboxdv1.Start) *client.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	res, err := c.Run(ctx, client.RunOptions{Start: start})
	if err != nil || res.Exit.GetExitCode() != 0 {
		t.Fatalf("run: %v %v", err, res)
	}
	return res
}
