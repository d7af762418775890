package daemon

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
	"weak"

	"google.golang.org/protobuf/proto"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// The audit log takes a line per event, three for the shortest session, and
// encoding/json's reflection, then a second pass to compact the line, cost
// as much as the rest of the event bus. appendJSON writes the same bytes
// directly; TestAuditRecordEncodingMatchesEncodingJSON and
// FuzzAuditRecordEncoding hold it to encoding/json's output, which is what
// the log's readers were written against.

// appendJSON appends r as encoding/json encodes it without HTML escaping,
// compact and without the trailing newline. ok is false when r holds a
// value only encoding/json can report the error of (a time outside years
// 0..9999, a launch time that is not finite); b is then unusable.
func (r *auditRecord) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, '{')
	if e := r.Event; e != nil {
		if b, ok = appendEventFields(b, e); !ok {
			return b, false
		}
	}
	if c := r.Caller; c != nil {
		b = appendKey(b, "caller")
		b = append(b, `{"uid":`...)
		b = strconv.AppendUint(b, uint64(c.UID), 10)
		b = append(b, `,"gid":`...)
		b = strconv.AppendUint(b, uint64(c.GID), 10)
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(c.PID), 10)
		if c.SID != "" {
			b = append(b, `,"sid":`...)
			b = appendString(b, c.SID)
		}
		if c.Admin {
			b = append(b, `,"admin":true`...)
		}
		if c.Session != "" {
			b = append(b, `,"session":`...)
			b = appendString(b, c.Session)
		}
		b = append(b, '}')
	}
	if len(r.Policy) > 0 {
		b = appendKey(b, "policy")
		b = append(b, r.Policy...)
	}
	b = appendStringField(b, "policy_digest", r.PolicyDigest)
	b = appendStringField(b, "cwd", r.Cwd)
	if r.TTY {
		b = appendKey(b, "tty")
		b = append(b, "true"...)
	}
	if len(r.Enforcement) > 0 {
		b = appendKey(b, "enforcement")
		b = append(b, r.Enforcement...)
	}
	if r.LaunchSeconds != 0 {
		if math.IsNaN(r.LaunchSeconds) || math.IsInf(r.LaunchSeconds, 0) {
			return b, false
		}
		b = appendKey(b, "launch_seconds")
		b = appendFloat(b, r.LaunchSeconds)
	}
	b = appendStringField(b, "refused_field", r.RefusedField)
	return append(b, '}'), true
}

// appendEventFields appends record.Event's fields, the first fields of the
// object, in the order of its declaration.
func appendEventFields(b []byte, e *record.Event) ([]byte, bool) {
	b = append(b, `"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	if y := e.Time.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, `,"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = append(b, `,"session":`...)
	b = appendString(b, e.Session)
	b = appendStringField(b, "parent", e.Parent)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	if e.Snapshot {
		b = append(b, `,"snapshot":true`...)
	}
	if len(e.Argv) > 0 {
		b = appendKey(b, "argv")
		b = append(b, '[')
		for i, a := range e.Argv {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	b = appendStringField(b, "from", e.From)
	b = appendStringField(b, "to", e.To)
	b = appendStringField(b, "reason", e.Reason)
	if e.ExitCode != nil {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(*e.ExitCode), 10)
	}
	if e.Signal != 0 {
		b = append(b, `,"signal":`...)
		b = strconv.AppendInt(b, int64(e.Signal), 10)
	}
	if d := e.Denial; d != nil {
		b = append(b, `,"denial":{"field":`...)
		b = appendString(b, d.Field)
		b = append(b, `,"operation":`...)
		b = appendString(b, d.Operation)
		b = appendStringField(b, "target", d.Target)
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(d.Pid), 10)
		if d.HostPid != 0 {
			b = append(b, `,"host_pid":`...)
			b = strconv.AppendInt(b, int64(d.HostPid), 10)
		}
		b = appendStringField(b, "command", d.Command)
		b = appendStringField(b, "errno", d.Errno)
		b = appendStringField(b, "detail", d.Detail)
		b = append(b, '}')
	}
	return b, true
}

// appendKey appends `"key":`, after a comma unless the object has just
// begun.
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendStringField appends an omitempty string field.
func appendStringField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(appendKey(b, key), v)
}

// appendString quotes s as encoding/json does with HTML escaping off:
// invalid UTF-8 becomes U+FFFD, and U+2028 and U+2029 are escaped, so a
// line can be pasted into JavaScript.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat formats a finite f as encoding/json does: the shortest
// decimal that reads back as f, in exponent form only when very small or
// large, with the exponent's leading zero dropped (1e-7, not 1e-07).
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// protoJSONCache keeps the compact protojson of the policies and
// enforcement reports the audit log has recorded lately, keyed by their
// type's name and deterministic wire encoding: sessions run under a
// handful of policies, and marshalling one to JSON costs far more than to
// the wire. The key is exact (equal keys are equal messages of one type,
// so equal JSON);
// the cache is only a shortcut. It is used under the event bus's lock.
//
// A message recorded before is found by identity first, without encoding
// it: the sessions under one policy share one policy and one report
// (share.Table), so that each event would otherwise encode the same
// message again only to find its key. Identity is exact too: what an event
// records is what Inspect and the watchers show, unlocked, so nothing
// changes it once it is published, and a weak pointer names one object,
// never another that later takes its address.
type protoJSONCache struct {
	m        map[string]json.RawMessage
	byObject map[any]json.RawMessage
}

// protoJSONCacheSize bounds the cache; a daemon seeing more distinct
// messages than this between two evictions starts over.
const protoJSONCacheSize = 128

// get returns m's protojson, compact. An error is encoding/json's finding
// the protojson invalid, which the caller reports as the record's encoding
// error, with the uncompacted JSON it returns.
func (c *protoJSONCache) get(m proto.Message) (json.RawMessage, error) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil, nil
	}
	id := objectID(m)
	if j, ok := c.byObject[id]; ok && id != nil {
		return j, nil
	}
	// A message that cannot be encoded (a string that is not UTF-8) is
	// not cached; protojson decides what becomes of it.
	name := m.ProtoReflect().Descriptor().FullName()
	buf := append(make([]byte, 0, 256), name...)
	key, keyErr := proto.MarshalOptions{Deterministic: true}.MarshalAppend(append(buf, 0), m)
	if keyErr != nil {
		return compactProtoJSON(m)
	}
	j, ok := c.m[string(key)]
	if !ok {
		var err error
		if j, err = compactProtoJSON(m); err != nil || j == nil {
			return j, err
		}
		if c.m == nil || len(c.m) >= protoJSONCacheSize {
			c.m = make(map[string]json.RawMessage)
		}
		c.m[string(key)] = j
	}
	if id != nil {
		if c.byObject == nil || len(c.byObject) >= protoJSONCacheSize {
			c.byObject = make(map[any]json.RawMessage)
		}
		c.byObject[id] = j
	}
	return j, nil
}

// compactProtoJSON is m's protojson, compacted: protojson varies its
// whitespace from build to build on purpose, and encoding/json compacted
// it as it wrote the line.
func compactProtoJSON(m proto.Message) (json.RawMessage, error) {
	j := protoJSON(m)
	if j == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, j); err != nil {
		return j, err
	}
	return buf.Bytes(), nil
}

// objectID names the one message object m, for the types events record;
// nil for others.
func objectID(m proto.Message) any {
	switch m := m.(type) {
	case *sandboxdv1.Policy:
		return weak.Make(m)
	case *sandboxdv1.EnforcementReport:
		return weak.Make(m)
	}
	return nil
}
