package launcherdarwin

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Violation is one operation a profile refused, as the kernel reported it
// to the unified log.
type Violation struct {
	// Session is the id from the tag of the rule that refused it.
	Session string
	Pid     int
	// Process is the process's name.
	Process   string
	Operation string
	// Target is what the operation was aimed at as the kernel printed it,
	// empty when it names none.
	Target string
	// Time is when it was logged, zero when the record did not say.
	Time time.Time
}

// logRecord is the part of a `log stream --style ndjson` record read here.
type logRecord struct {
	EventMessage     string `json:"eventMessage"`
	Timestamp        string `json:"timestamp"`
	ProcessID        *int64 `json:"processID"`
	ProcessImagePath string `json:"processImagePath"`
	SenderImagePath  string `json:"senderImagePath"`
}

// sandboxKext is where the kernel's Seatbelt logs from. Every process may
// write to the unified log, and the sandbox could write a line that looks
// like a violation of another session; only the kernel's records count.
const sandboxKext = "/System/Library/Extensions/Sandbox.kext/"

var (
	tagPattern = regexp.MustCompile(regexp.QuoteMeta(TagPrefix) + `([A-Za-z0-9._-]+)`)
	// violationPattern is "NAME(PID) deny(N) OPERATION[ TARGET]" after the
	// "Sandbox: " of a report. The name may hold spaces and parentheses; the
	// first "(PID) deny(" ends it, since the name comes before the target.
	violationPattern = regexp.MustCompile(`(?s)^(.+?)\((\d+)\) deny\(\d+\) ([a-z][a-z0-9*-]*)(?: (.*))?$`)
	// duplicatePattern is the kernel's summary of a refusal it repeated.
	duplicatePattern = regexp.MustCompile(`^\d+ duplicate reports? for `)
)

// timestampLayout is how `log` prints a record's time; the fraction of a
// second after the seconds is accepted without being in the layout.
const timestampLayout = "2006-01-02 15:04:05-0700"

// ParseViolation reads one line of `log stream --style ndjson`. It reports
// ok only for a Seatbelt violation the kernel logged with a session's tag:
// the stream's header, other records and lookalikes from processes are
// not violations.
//
// The rule's message follows the report, on a line of its own (whatever
// else is on that line is dropped), or appended after a space. It is the
// last tag in the text that counts: the target, which the sandbox chose,
// may spell a tag too, but comes before it.
func ParseViolation(line []byte) (Violation, bool) {
	var r logRecord
	if err := json.Unmarshal(line, &r); err != nil {
		return Violation{}, false
	}
	if r.ProcessID == nil || *r.ProcessID != 0 || r.ProcessImagePath != "/kernel" || !strings.HasPrefix(r.SenderImagePath, sandboxKext) {
		return Violation{}, false
	}
	msg := r.EventMessage
	tags := tagPattern.FindAllStringSubmatchIndex(msg, -1)
	if len(tags) == 0 {
		return Violation{}, false
	}
	last := tags[len(tags)-1]
	session := msg[last[2]:last[3]]
	msg = msg[:last[0]]
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	} else {
		msg = strings.TrimSuffix(msg, " ")
	}
	msg = duplicatePattern.ReplaceAllString(msg, "")
	body, ok := strings.CutPrefix(msg, "Sandbox: ")
	if !ok {
		return Violation{}, false
	}
	m := violationPattern.FindStringSubmatch(body)
	if m == nil {
		return Violation{}, false
	}
	pid, err := strconv.Atoi(m[2])
	if err != nil {
		return Violation{}, false
	}
	v := Violation{Session: session, Pid: pid, Process: m[1], Operation: m[3], Target: m[4]}
	if t, err := time.Parse(timestampLayout, r.Timestamp); err == nil {
		v.Time = t
	}
	return v, true
}

// Denial is v as a denial event of the session planned by p: the policy
// field that refused it, and its target in the form denials share across
// backends. macOS has no pid namespaces, so the pid the sandbox sees is the
// host's.
func (v Violation) Denial(p *Plan) *sandboxdv1.Denial {
	target := v.Target
	switch {
	case strings.HasPrefix(v.Operation, "network"):
		if strings.HasPrefix(target, "/") {
			target = "unix:" + target
		}
	case strings.HasPrefix(v.Operation, "file-"):
		// file-ioctl reports "path:PATH ioctl-command:(...)".
		if t, ok := strings.CutPrefix(target, "path:"); ok {
			target, _, _ = strings.Cut(t, " ioctl-command:")
		}
	}
	at := v.Time
	if at.IsZero() {
		at = time.Now()
	}
	field := p.Classify(v.Operation, target)
	return &sandboxdv1.Denial{
		Time:      timestamppb.New(at),
		Field:     field,
		Operation: v.Operation,
		Target:    target,
		Pid:       int32(v.Pid),
		HostPid:   int32(v.Pid),
		Command:   v.Process,
		Errno:     "EPERM",
	}
}
