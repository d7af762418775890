package daemon

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
	"github.com/sandboxd/sandboxd/policy"
)

// referenceJSON is what auditlog.Log.Write made of a record before
// appendJSON: encoding/json without HTML escaping, compacted.
func referenceJSON(t testing.TB, rec *auditRecord) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, buf.Bytes()); err != nil {
		t.Fatalf("encoding/json made JSON it cannot compact: %v", err)
	}
	return out.Bytes(), nil
}

func checkSameAsEncodingJSON(t *testing.T, rec *auditRecord) {
	t.Helper()
	want, werr := referenceJSON(t, rec)
	got, ok := rec.appendJSON(nil)
	if werr != nil {
		if ok {
			t.Fatalf("encoding/json fails (%v), appendJSON made %s", werr, got)
		}
		return
	}
	if !ok {
		t.Fatalf("appendJSON gave up on a record encoding/json encodes as %s", want)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendJSON:\n%s\nencoding/json:\n%s", got, want)
	}
}

func testEnforcement() *sandboxdv1.EnforcementReport {
	return &sandboxdv1.EnforcementReport{
		Backend:      "linux",
		MechanismSet: "namespaces",
		Fields: []*sandboxdv1.FieldEnforcement{
			{Field: "filesystem.write", Mechanism: "mount-ns ro-binds + landlock abi 7"},
			{Field: "network.mode", Mechanism: "net-ns <loopback only> & \"quoted\""},
		},
		DenialSources: []*sandboxdv1.DenialSource{{Kind: "process", Observed: true, How: "seccomp user notification"}},
	}
}

func testPolicy(t testing.TB) *sandboxdv1.Policy {
	t.Helper()
	p, err := policy.Preset("workspace-write", "/work/space & <more>")
	if err != nil {
		t.Fatal(err)
	}
	return policy.Normalize(p)
}

// The audit log's lines are a documented format that readers parse: the
// direct encoder must write exactly the bytes encoding/json did, for every
// kind of record and every awkward string.
func TestAuditRecordEncodingMatchesEncodingJSON(t *testing.T) {
	code := int32(0)
	neg := int32(-3)
	when := time.Date(2026, 11, 25, 23, 4, 5, 123456789, time.UTC)
	awkward := []string{
		"", "plain", `quote " and \ backslash`, "a && b > c < d", "tab\tnew\nline\rcr\bbs\fff",
		"\x00\x01\x1f\x7f", "é ü 漢字 🙂", "bad \xff\xfe utf8 \xc3", "line\u2028sep\u2029para", "\u00a0nbsp",
	}
	pol := testPolicy(t)
	var recs []*auditRecord
	for _, s := range awkward {
		recs = append(recs,
			&auditRecord{Event: &record.Event{Seq: 1, Time: when, Session: s, Type: "state", To: s, Argv: []string{s, "x"}}},
			&auditRecord{Event: &record.Event{Seq: 2, Time: when, Session: "id", Parent: s, Type: "denial", Denial: &record.Denial{
				Field: s, Operation: s, Target: s, Pid: 7, HostPid: 1234, Command: s, Errno: s, Detail: s,
			}}, Cwd: s, PolicyDigest: s, RefusedField: s, Caller: &auditCaller{UID: 1000, GID: 1000, PID: 42, SID: s, Admin: true, Session: s}},
		)
	}
	recs = append(recs,
		&auditRecord{Event: &record.Event{}},
		&auditRecord{Event: &record.Event{Seq: math.MaxUint64, Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Type: "state", Snapshot: true, Argv: []string{}}},
		&auditRecord{Event: &record.Event{Seq: 3, Time: when.In(time.FixedZone("x", -5*3600)), Type: "state", From: "running", To: "exited", ExitCode: &code, Signal: 9}},
		&auditRecord{Event: &record.Event{Seq: 4, Time: when, Type: "state", To: "failed-to-start", ExitCode: &neg, Reason: "no such file"}},
		&auditRecord{Event: &record.Event{Seq: 5, Time: when, Type: "denial", Denial: &record.Denial{}}},
		&auditRecord{Event: &record.Event{Seq: 6, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		&auditRecord{Event: &record.Event{Seq: 7, Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		&auditRecord{Event: &record.Event{Seq: 8, Time: when}, Caller: &auditCaller{}, TTY: true, LaunchSeconds: math.Inf(1)},
		&auditRecord{Event: &record.Event{Seq: 9, Time: when}, LaunchSeconds: math.NaN()},
		&auditRecord{Caller: &auditCaller{UID: 1}},
		&auditRecord{},
	)
	for _, f := range []float64{1e-9, 2.5e-7, 1e-6, 0.000999, 0.0123456789, 1, 12.5, 1e20, 1e21, 3.4e38, math.SmallestNonzeroFloat64, -1e-7} {
		recs = append(recs, &auditRecord{Event: &record.Event{Seq: 10, Time: when}, LaunchSeconds: f})
	}
	var cache protoJSONCache
	for _, m := range []proto.Message{pol, testEnforcement()} {
		j, err := cache.get(m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &auditRecord{Event: &record.Event{Seq: 11, Time: when, Type: "state", To: "starting"}, Policy: j, Enforcement: j, TTY: true})
	}
	for _, rec := range recs {
		checkSameAsEncodingJSON(t, rec)
	}
}

// The sink writes the same file through appendJSON and the cache as
// through auditlog.Log.Write with protojson, as it did before them: the
// events of a session from its announcement to its exit, with a policy and
// an enforcement report, each twice so the second comes from the cache.
func TestAuditSinkWritesWhatEncodingJSONWrote(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	var logs [2]*auditlog.Log
	for i, d := range dirs {
		l, err := auditlog.Open(auditlog.Options{Dir: d})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	sink := auditSink(logs[0], t.Logf, func(err error) {
		if err != nil {
			t.Errorf("audit health: %v", err)
		}
	})
	for _, step := range sessionEvents(t) {
		sink(step.ev, step.d)
		rec := &auditRecord{Event: record.FromEvent(step.ev), PolicyDigest: step.d.digest, Cwd: step.d.cwd, TTY: step.d.tty, RefusedField: step.d.refusedField,
			Policy: protoJSON(step.d.policy), Enforcement: protoJSON(step.d.enforcement)}
		if c := step.d.caller; c != nil {
			rec.Caller = &auditCaller{UID: c.UID, GID: c.GID, PID: c.PID, SID: c.SID, Admin: c.Admin, Session: c.Session}
		}
		if step.d.launchLatency > 0 {
			rec.LaunchSeconds = step.d.launchLatency.Seconds()
		}
		if err := logs[1].Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	var files [2][]byte
	for i, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "audit.log"))
		if err != nil {
			t.Fatal(err)
		}
		files[i] = b
	}
	if n := strings.Count(string(files[0]), "\n"); n != len(sessionEvents(t)) {
		t.Errorf("sink wrote %d lines, want %d", n, len(sessionEvents(t)))
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatalf("sink wrote:\n%s\nencoding/json wrote:\n%s", files[0], files[1])
	}
}

type sinkStep struct {
	ev *sandboxdv1.Event
	d  *eventDetail
}

// sessionEvents are the events of two sessions of /bin/true under one
// policy, as the bus hands them to its sinks.
func sessionEvents(t testing.TB) []sinkStep {
	pol := testPolicy(t)
	digest := policy.Digest(pol)
	caller := &Caller{UID: 1000, GID: 1000, PID: 4242}
	argv := []string{"/bin/true"}
	var steps []sinkStep
	for i, id := range []string{"0123456789abcdef", "fedcba9876543210"} {
		seq := uint64(3 * i)
		at := func(n uint64) *sandboxdv1.Event {
			return &sandboxdv1.Event{Seq: seq + n, Time: timestamppb.New(time.Date(2026, 11, 25, 23, 0, 0, int(seq+n)*1000, time.UTC)), SessionId: id}
		}
		starting := at(1)
		starting.Kind, starting.Argv = &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{To: sandboxdv1.State_STARTING}}, argv
		running := at(2)
		running.Kind, running.Argv = &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_STARTING, To: sandboxdv1.State_RUNNING}}, argv
		exited := at(3)
		exited.Kind = &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_EXITED}}
		steps = append(steps,
			sinkStep{starting, &eventDetail{caller: caller, policy: pol, digest: digest, cwd: "/work/space", tty: i == 1}},
			sinkStep{running, &eventDetail{enforcement: testEnforcement(), launchLatency: 1234567 * time.Nanosecond}},
			sinkStep{exited, &eventDetail{}},
		)
	}
	return steps
}

// FuzzAuditRecordEncoding holds appendJSON to encoding/json's bytes for
// any strings, numbers and times.
func FuzzAuditRecordEncoding(f *testing.F) {
	f.Add("id", "/bin/true", "a \"b\" <c>", uint64(1), int64(0), int32(0), 0.001, true)
	f.Add("\xff", "\u2028", "\x00", uint64(math.MaxUint64), int64(-62135596800), int32(-1), 1e-7, false)
	f.Fuzz(func(t *testing.T, a, b, c string, seq uint64, unix int64, code int32, secs float64, tty bool) {
		rec := &auditRecord{
			Event: &record.Event{
				Seq: seq, Time: time.Unix(unix, int64(code)).UTC(), Session: a, Parent: b, Type: c, Snapshot: tty, Argv: []string{a, b, c},
				From: a, To: b, Reason: c, ExitCode: &code, Signal: code,
				Denial: &record.Denial{Field: a, Operation: b, Target: c, Pid: code, HostPid: -code, Command: a, Errno: b, Detail: c},
			},
			Caller:       &auditCaller{UID: uint32(seq), GID: uint32(seq >> 32), PID: code, SID: a, Admin: tty, Session: b},
			PolicyDigest: c, Cwd: a, TTY: tty, LaunchSeconds: secs, RefusedField: b,
		}
		checkSameAsEncodingJSON(t, rec)
	})
}

// BenchmarkAuditSink is the audit log's share of a launch: the three
// events of a /bin/true session, written to a real file.
func BenchmarkAuditSink(b *testing.B) {
	l, err := auditlog.Open(auditlog.Options{Dir: b.TempDir(), MaxBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	sink := auditSink(l, b.Logf, func(error) {})
	steps := sessionEvents(b)[:3]
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range steps {
			sink(s.ev, s.d)
		}
	}
}

// A policy or report the audit log recorded before is found again without
// being encoded, and an equal copy of it, another object, gets the same
// JSON.
func TestProtoJSONCacheFindsARecordedMessageWithoutEncodingIt(t *testing.T) {
	pol, err := policy.Preset("workspace-write", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var cache protoJSONCache
	for _, m := range []proto.Message{pol, testEnforcement()} {
		first, err := cache.get(m)
		if err != nil || first == nil {
			t.Fatalf("%T: %s, %v", m, first, err)
		}
		if n := testing.AllocsPerRun(100, func() { cache.get(m) }); n != 0 {
			t.Errorf("%T recorded before: %v allocations to find its JSON again", m, n)
		}
		again, err := cache.get(proto.Clone(m))
		if err != nil || !bytes.Equal(again, first) {
			t.Errorf("%T: an equal copy got %s (%v), the first %s", m, again, err, first)
		}
	}
}

// A reader of the audit log through record.Event sees what a
// denials-suppressed record sums up.
func TestRecordEventReadsADenialsSuppressedRecord(t *testing.T) {
	first, last := time.Unix(100, 0).UTC(), time.Unix(105, 0).UTC()
	sum := &denialSummary{count: 7, first: first, last: last, latest: &sandboxdv1.Denial{Field: "filesystem.write", Target: "/etc/x"}}
	line, err := json.Marshal(newSuppressedRecord(&sandboxdv1.Event{Time: timestamppb.New(last), SessionId: "s"}, sum))
	if err != nil {
		t.Fatal(err)
	}
	var r record.Event
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatal(err)
	}
	if r.Type != "denials-suppressed" || r.Count != 7 || r.First == nil || !r.First.Equal(first) || r.Last == nil || !r.Last.Equal(last) || r.Denial == nil || r.Denial.Target != "/etc/x" {
		t.Errorf("record.Event read %s as %+v", line, r)
	}
}
