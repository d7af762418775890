package promtext

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Family is one metric family as parsed: its TYPE, its HELP (unescaped, ""
// if absent) and its samples in input order.
type Family struct {
	Name    string
	Type    string // counter, gauge, histogram, summary or untyped
	Help    string
	Samples []Sample
}

// Sample is one sample line.
type Sample struct {
	Name         string // the family name, or it with _bucket, _sum or _count
	Labels       map[string]string
	Value        float64
	Timestamp    int64 // milliseconds since the epoch, if HasTimestamp
	HasTimestamp bool
}

// Parse reads the text format strictly, for tests that check what a
// Registry serves. Beyond the syntax (line by line, escapes, names,
// numbers, the final newline) it rejects what Prometheus would misread:
// a sample before its family's TYPE, a family's lines not in one group,
// a second HELP or TYPE, a series given twice, a negative counter, and a
// histogram whose buckets are unordered or not cumulative, lack +Inf,
// or disagree with _count, or that lacks _sum or _count (the same
// for a summary's _sum and _count).
func Parse(r io.Reader) (map[string]*Family, error) {
	p := &parser{
		families: map[string]*Family{},
		owner:    map[string]*Family{},
		helped:   map[string]bool{},
		done:     map[*Family]bool{},
		seen:     map[string]bool{},
		groups:   map[string]*group{},
	}
	br := bufio.NewReader(r)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			if line != "" {
				return nil, fmt.Errorf("promtext: line %d: no newline at end of input", lineNo)
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("promtext: read: %w", err)
		}
		if err := p.line(strings.TrimSuffix(line, "\n")); err != nil {
			return nil, fmt.Errorf("promtext: line %d: %w", lineNo, err)
		}
	}
	if err := p.finish(); err != nil {
		return nil, fmt.Errorf("promtext: %w", err)
	}
	return p.families, nil
}

type parser struct {
	families map[string]*Family
	// owner maps each sample name a TYPE line allows (a histogram's
	// _bucket, _sum and _count too) to its family.
	owner  map[string]*Family
	helped map[string]bool
	cur    *Family          // the family of the previous line
	done   map[*Family]bool // families whose group of lines has ended
	seen   map[string]bool  // series already given, by name and labels
	groups map[string]*group
}

// group checks one histogram or summary series: the samples sharing a
// family and labels other than le or quantile.
type group struct {
	family          *Family
	labels          string // for messages
	buckets         int
	lastLe          float64
	lastBucket      float64
	inf, sum, count bool
	infValue        float64
	countValue      float64
}

const blanks = " \t"

func (p *parser) line(line string) error {
	if !utf8.ValidString(line) {
		return errors.New("invalid UTF-8")
	}
	line = strings.TrimLeft(line, blanks)
	switch {
	case line == "":
		return nil
	case line[0] == '#':
		return p.comment(line[1:])
	}
	return p.sample(line)
}

func (p *parser) comment(rest string) error {
	keyword, rest := token(rest)
	if keyword != "HELP" && keyword != "TYPE" {
		return nil // a plain comment
	}
	name, rest := token(rest)
	if !validMetricName(name) {
		return fmt.Errorf("%s: invalid metric name %q", keyword, name)
	}
	if o := p.owner[name]; o != nil && o.Name != name {
		return fmt.Errorf("%s for %s, a sample name of %s %s", keyword, name, o.Type, o.Name)
	}
	f := p.families[name]
	if f == nil {
		f = &Family{Name: name}
		p.families[name] = f
	}
	if err := p.enter(f); err != nil {
		return err
	}
	if keyword == "HELP" {
		if p.helped[name] {
			return fmt.Errorf("second HELP for %s", name)
		}
		p.helped[name] = true
		help, err := unescape(strings.TrimLeft(rest, blanks), false)
		if err != nil {
			return fmt.Errorf("HELP for %s: %w", name, err)
		}
		f.Help = help
		return nil
	}
	typ, rest := token(rest)
	if rest != "" {
		return fmt.Errorf("TYPE for %s: unexpected %q after the type", name, rest)
	}
	if f.Type != "" {
		return fmt.Errorf("second TYPE for %s", name)
	}
	names := []string{name}
	switch typ {
	case "counter", "gauge", "untyped":
	case "histogram":
		names = append(names, name+"_bucket", name+"_sum", name+"_count")
	case "summary":
		names = append(names, name+"_sum", name+"_count")
	default:
		return fmt.Errorf("TYPE for %s: unknown type %q", name, typ)
	}
	for _, n := range names {
		if o := p.owner[n]; o != nil {
			return fmt.Errorf("TYPE %s %s: sample name %s belongs to %s", name, typ, n, o.Name)
		}
		if o := p.families[n]; o != nil && o != f {
			return fmt.Errorf("TYPE %s %s: sample name %s has a HELP of its own", name, typ, n)
		}
	}
	for _, n := range names {
		p.owner[n] = f
	}
	f.Type = typ
	return nil
}

// enter makes f the current family, refusing to go back to one whose group
// of lines has ended.
func (p *parser) enter(f *Family) error {
	if f == p.cur {
		return nil
	}
	if p.done[f] {
		return fmt.Errorf("lines of %s are not in one group", f.Name)
	}
	if p.cur != nil {
		p.done[p.cur] = true
	}
	p.cur = f
	return nil
}

func (p *parser) sample(line string) error {
	n := nameLen(line)
	name, rest := line[:n], line[n:]
	if !validMetricName(name) {
		return fmt.Errorf("invalid metric name in %q", line)
	}
	f := p.owner[name]
	if f == nil {
		return fmt.Errorf("sample %s has no TYPE before it", name)
	}
	if err := p.enter(f); err != nil {
		return err
	}
	labels := map[string]string{}
	if after := strings.TrimLeft(rest, blanks); strings.HasPrefix(after, "{") {
		var err error
		if rest, err = parseLabels(after[1:], labels); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if rest == "" || !strings.ContainsRune(blanks, rune(rest[0])) {
		return fmt.Errorf("%s: want a blank before the value, got %q", name, rest)
	}
	valueText, rest := token(rest)
	value, err := strconv.ParseFloat(valueText, 64)
	if err != nil {
		return fmt.Errorf("%s: value %q: %w", name, valueText, err)
	}
	s := Sample{Name: name, Labels: labels, Value: value}
	if rest != "" {
		tsText, rest := token(rest)
		if rest != "" {
			return fmt.Errorf("%s: unexpected %q after the timestamp", name, rest)
		}
		if s.Timestamp, err = strconv.ParseInt(tsText, 10, 64); err != nil {
			return fmt.Errorf("%s: timestamp %q: %w", name, tsText, err)
		}
		s.HasTimestamp = true
	}
	key := name + labelKey(labels, "")
	if p.seen[key] {
		return fmt.Errorf("series %s%s given twice", name, labelKey(labels, ""))
	}
	p.seen[key] = true
	if err := p.check(f, s); err != nil {
		return fmt.Errorf("%s%s: %w", name, labelKey(labels, ""), err)
	}
	f.Samples = append(f.Samples, s)
	return nil
}

// check applies the rules of the family's type to one sample.
func (p *parser) check(f *Family, s Sample) error {
	switch f.Type {
	case "counter":
		if s.Value < 0 {
			return fmt.Errorf("counter is negative (%v)", s.Value)
		}
		return nil
	case "histogram", "summary":
	default:
		return nil
	}
	special := "le"
	if f.Type == "summary" {
		special = "quantile"
	}
	gkey := f.Name + labelKey(s.Labels, special)
	g := p.groups[gkey]
	if g == nil {
		g = &group{family: f, labels: labelKey(s.Labels, special)}
		p.groups[gkey] = g
	}
	bound, has := s.Labels[special]
	switch suffix := strings.TrimPrefix(s.Name, f.Name); suffix {
	case "_sum", "_count":
		if has {
			return fmt.Errorf("%s label on %s", special, suffix)
		}
		if suffix == "_sum" {
			g.sum = true
		} else {
			if s.Value < 0 || s.Value != math.Trunc(s.Value) {
				return fmt.Errorf("_count %v is negative or fractional", s.Value)
			}
			g.count, g.countValue = true, s.Value
		}
	case "_bucket":
		if !has {
			return errors.New("bucket without le")
		}
		le, err := strconv.ParseFloat(bound, 64)
		if err != nil || math.IsNaN(le) {
			return fmt.Errorf("bucket bound le=%q is not a number", bound)
		}
		if g.buckets > 0 && le <= g.lastLe {
			return fmt.Errorf("bucket le=%q does not follow le=%s", bound, formatFloat(g.lastLe))
		}
		if s.Value < 0 || s.Value != math.Trunc(s.Value) {
			return fmt.Errorf("bucket count %v is negative or fractional", s.Value)
		}
		if g.buckets > 0 && s.Value < g.lastBucket {
			return fmt.Errorf("buckets are not cumulative: %v after %v", s.Value, g.lastBucket)
		}
		g.buckets++
		g.lastLe, g.lastBucket = le, s.Value
		if math.IsInf(le, 1) {
			g.inf, g.infValue = true, s.Value
		}
	default: // the bare family name
		if f.Type == "histogram" {
			return errors.New("histogram sample without _bucket, _sum or _count")
		}
		if !has {
			return errors.New("quantile sample without quantile")
		}
		if q, err := strconv.ParseFloat(bound, 64); err != nil || q < 0 || q > 1 {
			return fmt.Errorf("quantile=%q is not in [0, 1]", bound)
		}
	}
	return nil
}

func (p *parser) finish() error {
	for _, f := range p.families {
		if f.Type == "" {
			return fmt.Errorf("%s has a HELP but no TYPE", f.Name)
		}
	}
	for _, g := range p.groups {
		name := g.family.Name + g.labels
		switch {
		case !g.sum || !g.count:
			return fmt.Errorf("%s %s lacks _sum or _count", g.family.Type, name)
		case g.family.Type != "histogram":
		case !g.inf:
			return fmt.Errorf("histogram %s has no +Inf bucket", name)
		case g.infValue != g.countValue:
			return fmt.Errorf("histogram %s: _count %v differs from the +Inf bucket %v", name, g.countValue, g.infValue)
		}
	}
	return nil
}

// parseLabels reads `name="value",...}` into labels and returns what
// follows the closing brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, blanks)
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		n := labelNameLen(s)
		name := s[:n]
		if !validLabelName(name) {
			return "", fmt.Errorf("invalid label name at %q", s)
		}
		if _, dup := labels[name]; dup {
			return "", fmt.Errorf("label %s repeated", name)
		}
		s = strings.TrimLeft(s[n:], blanks)
		if !strings.HasPrefix(s, "=") {
			return "", fmt.Errorf("label %s: want =, got %q", name, s)
		}
		s = strings.TrimLeft(s[1:], blanks)
		if !strings.HasPrefix(s, `"`) {
			return "", fmt.Errorf("label %s: want a quoted value, got %q", name, s)
		}
		end := closingQuote(s[1:])
		if end < 0 {
			return "", fmt.Errorf("label %s: unterminated value", name)
		}
		value, err := unescape(s[1:1+end], true)
		if err != nil {
			return "", fmt.Errorf("label %s: %w", name, err)
		}
		labels[name] = value
		s = strings.TrimLeft(s[2+end:], blanks)
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
		default:
			return "", fmt.Errorf("after label %s: want , or }, got %q", name, s)
		}
	}
}

// closingQuote returns the index of the first unescaped " in s, or -1.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescape undoes the escapes of a label value (\\, \" and \n) or of HELP
// text (\\ and \n), refusing any other.
func unescape(s string, label bool) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch {
		case i == len(s):
			return "", errors.New(`trailing \`)
		case s[i] == '\\':
			b.WriteByte('\\')
		case s[i] == 'n':
			b.WriteByte('\n')
		case s[i] == '"' && label:
			b.WriteByte('"')
		default:
			return "", fmt.Errorf(`unknown escape \%c`, s[i])
		}
	}
	return b.String(), nil
}

// labelKey renders labels sorted by name, without the one named except, as
// a series key and for messages.
func labelKey(labels map[string]string, except string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		if n != except {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, labels[n])
	}
	b.WriteByte('}')
	return b.String()
}

// token skips leading blanks and splits off the next blank-delimited word;
// the remainder keeps its leading blanks trimmed.
func token(s string) (word, rest string) {
	s = strings.TrimLeft(s, blanks)
	i := strings.IndexAny(s, blanks)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], blanks)
}

func nameLen(s string) int {
	i := 0
	for i < len(s) && (s[i] == ':' || s[i] == '_' || isAlnum(s[i])) {
		i++
	}
	return i
}

func labelNameLen(s string) int {
	i := 0
	for i < len(s) && (s[i] == '_' || isAlnum(s[i])) {
		i++
	}
	return i
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
