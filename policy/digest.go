package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// digestHeader names the canonical text format; it changes only if the
// format itself does, which would change every digest.
const digestHeader = "sandboxd policy v1"

// Digest returns "sha256:<hex>" of the canonical text of Normalize(p). Two
// policies that mean the same (lists in another order, unspecified versus
// explicit default values, a nil versus an empty submessage, uncleaned
// paths) have the same digest, on every OS and whatever the protobuf wire
// layout.
//
// The canonical text is the header line followed by sorted lines of the form
// "field.path=value", one per list entry, with strings quoted and enums by
// name. A field whose value is its default (the value Default has) produces
// no line at all. That is what keeps digests stable when the message grows:
// adding a field must not change any existing digest as long as its default
// value produces no line, so a new field has to be given that same rule.
func Digest(p *sandboxdv1.Policy) string {
	sum := sha256.Sum256([]byte(canonicalText(Normalize(p))))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalText renders a normalized policy; see Digest.
func canonicalText(p *sandboxdv1.Policy) string {
	var lines []string
	add := func(field, value string) { lines = append(lines, field+"="+value) }
	addPaths := func(field string, paths []string) {
		for _, s := range paths {
			add(field, strconv.Quote(s))
		}
	}

	fs := p.GetFilesystem()
	if fs.GetRead() != sandboxdv1.Filesystem_ALL {
		add("filesystem.read", fs.GetRead().String())
	}
	addPaths("filesystem.read_roots", fs.GetReadRoots())
	addPaths("filesystem.write", fs.GetWrite())
	addPaths("filesystem.read_only", fs.GetReadOnly())
	addPaths("filesystem.deny", fs.GetDeny())
	addPaths("filesystem.layer", fs.GetLayer())

	n := p.GetNetwork()
	if n.GetMode() != sandboxdv1.Network_NONE {
		add("network.mode", n.GetMode().String())
	}
	for _, a := range n.GetAllow() {
		// Subfields follow the same rule as fields: omitted when default.
		v := "host=" + strconv.Quote(a.GetHost())
		if a.GetPort() != 0 {
			v += " port=" + strconv.FormatUint(uint64(a.GetPort()), 10)
		}
		add("network.allow", "{"+v+"}")
	}

	l := p.GetLimits()
	if t := l.GetTimeout(); t != nil {
		add("limits.timeout", formatDuration(t.GetSeconds(), t.GetNanos()))
	}
	addUint := func(field string, v uint64) {
		if v != 0 {
			add(field, strconv.FormatUint(v, 10))
		}
	}
	addUint("limits.memory_bytes", l.GetMemoryBytes())
	addUint("limits.pids", uint64(l.GetPids()))
	addUint("limits.cpu_millis", uint64(l.GetCpuMillis()))
	addUint("limits.output_bytes", l.GetOutputBytes())
	addUint("limits.layer_bytes", l.GetLayerBytes())

	if p.GetChildren().GetAllow() {
		add("children.allow", "true")
	}

	// Sorting makes the text independent of the order fields are visited in
	// here, so adding a field anywhere in this function cannot reorder lines.
	slices.Sort(lines)
	var b strings.Builder
	b.WriteString(digestHeader + "\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// formatDuration writes seconds and nanoseconds exactly (time.Duration
// would saturate at about 292 years, which protobuf durations exceed), with
// trailing fractional zeros trimmed: "90s", "1.5s".
func formatDuration(seconds int64, nanos int32) string {
	if nanos == 0 {
		return fmt.Sprintf("%ds", seconds)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%09d", seconds, nanos), "0") + "s"
}
