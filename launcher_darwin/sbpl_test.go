package launcherdarwin

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// node is one S-expression of a profile: an atom (symbol, string, number)
// or a list.
type node struct {
	list []node
	atom string
	// str marks a string literal, whose atom is its unquoted value.
	str    bool
	isList bool
}

func (n node) String() string {
	if !n.isList {
		if n.str {
			return strconv.Quote(n.atom)
		}
		return n.atom
	}
	parts := make([]string, len(n.list))
	for i, c := range n.list {
		parts[i] = c.String()
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// head is the symbol a list starts with.
func (n node) head() string {
	if !n.isList || len(n.list) == 0 || n.list[0].isList {
		return ""
	}
	return n.list[0].atom
}

// parseSBPL reads the S-expressions of a profile the way SBPL's reader
// does for what the planner writes: lists, symbols, numbers, string
// literals with Scheme escapes, and ";" comments. It fails on anything
// unbalanced or unterminated.
func parseSBPL(src string) ([]node, error) {
	p := &sexprParser{src: src}
	var forms []node
	for {
		p.skip()
		if p.pos >= len(p.src) {
			return forms, nil
		}
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		forms = append(forms, n)
	}
}

type sexprParser struct {
	src string
	pos int
}

func (p *sexprParser) skip() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ';':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *sexprParser) expr() (node, error) {
	p.skip()
	if p.pos >= len(p.src) {
		return node{}, fmt.Errorf("unexpected end of profile")
	}
	switch c := p.src[p.pos]; c {
	case '(':
		start := p.pos
		p.pos++
		n := node{isList: true}
		for {
			p.skip()
			if p.pos >= len(p.src) {
				return node{}, fmt.Errorf("list opened at byte %d is not closed", start)
			}
			if p.src[p.pos] == ')' {
				p.pos++
				return n, nil
			}
			child, err := p.expr()
			if err != nil {
				return node{}, err
			}
			n.list = append(n.list, child)
		}
	case ')':
		return node{}, fmt.Errorf("unbalanced ) at byte %d", p.pos)
	case '"':
		start := p.pos
		p.pos++
		var b strings.Builder
		for {
			if p.pos >= len(p.src) {
				return node{}, fmt.Errorf("string opened at byte %d is not closed", start)
			}
			c := p.src[p.pos]
			p.pos++
			switch c {
			case '"':
				return node{atom: b.String(), str: true}, nil
			case '\\':
				if p.pos >= len(p.src) {
					return node{}, fmt.Errorf("string opened at byte %d ends in an escape", start)
				}
				e := p.src[p.pos]
				p.pos++
				switch e {
				case '"', '\\':
					b.WriteByte(e)
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					return node{}, fmt.Errorf("unknown escape \\%c at byte %d", e, p.pos-1)
				}
			default:
				b.WriteByte(c)
			}
		}
	default:
		start := p.pos
		for p.pos < len(p.src) && !strings.ContainsRune("() \t\r\n;\"", rune(p.src[p.pos])) {
			p.pos++
		}
		return node{atom: p.src[start:p.pos]}, nil
	}
}

func TestParseSBPLRejectsMalformedProfiles(t *testing.T) {
	for _, src := range []string{
		"(version 1",
		"(allow file-read*))",
		`(allow file-read* (subpath "/usr))`,
		`(allow file-read* (subpath "/u\qsr"))`,
	} {
		if _, err := parseSBPL(src); err == nil {
			t.Errorf("parseSBPL(%q) accepted a malformed profile", src)
		}
	}
	forms, err := parseSBPL("; comment\n(version 1)\n(allow file-read* (subpath \"/a \\\"b\\\"\")) ; trailing\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(forms); got != `[(version 1) (allow file-read* (subpath "/a \"b\""))]` {
		t.Errorf("parsed %s", got)
	}
}

// query is one operation a sandboxed process attempts.
type query struct {
	op string
	// path is the file, or the unix socket connected to; addr an inet
	// address for network operations.
	path, addr string
	// mode is the file's mode, for the file-mode filter.
	mode uint32
}

func (q query) String() string {
	return q.op + " " + q.path + q.addr
}

// profileModel evaluates the rules of a parsed profile for the subset of
// SBPL the planner writes. Seatbelt's precedence between an allow and a
// deny that both match is not documented; the planner must not depend on
// it, so the model decides each query twice, with the last matching rule
// winning and with any matching explicit deny winning, and the two must
// agree.
type profileModel struct {
	rules  []node
	params map[string]string
}

func newProfileModel(t *testing.T, pl *Plan) *profileModel {
	t.Helper()
	forms, err := parseSBPL(pl.Profile)
	if err != nil {
		t.Fatalf("profile does not parse: %v\n%s", err, pl.Profile)
	}
	m := &profileModel{params: map[string]string{}}
	for _, kv := range pl.Params {
		m.params[kv.Key] = kv.Value
	}
	for _, f := range forms {
		switch f.head() {
		case "version":
		case "allow", "deny":
			m.rules = append(m.rules, f)
		default:
			t.Fatalf("unexpected top-level form %s", f)
		}
	}
	return m
}

// allowed decides q under both precedence readings and fails the test when
// they differ.
func (m *profileModel) allowed(t *testing.T, q query) bool {
	t.Helper()
	last, anyDeny, anyAllow := false, false, false
	for _, r := range m.rules {
		if !m.matches(t, r, q) {
			continue
		}
		allow := r.head() == "allow"
		last = allow
		if isDefault(r) {
			continue
		}
		if allow {
			anyAllow = true
		} else {
			anyDeny = true
		}
	}
	denyWins := anyAllow && !anyDeny
	if last != denyWins {
		t.Errorf("%v: the last matching rule says allowed=%v, an explicit deny winning says allowed=%v: the profile depends on precedence", q, last, denyWins)
	}
	return last
}

func isDefault(r node) bool {
	return len(r.list) > 1 && r.list[1].atom == "default"
}

func (m *profileModel) matches(t *testing.T, r node, q query) bool {
	var ops, filters []node
	for _, c := range r.list[1:] {
		if c.isList {
			if c.head() != "with" {
				filters = append(filters, c)
			}
		} else {
			ops = append(ops, c)
		}
	}
	opMatch := false
	for _, o := range ops {
		if opMatches(o.atom, q.op) {
			opMatch = true
		}
	}
	if !opMatch {
		return false
	}
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if m.filter(t, f, q) {
			return true
		}
	}
	return false
}

// opMatches: "default" is every operation, "x*" every operation named x...
func opMatches(pattern, op string) bool {
	if pattern == "default" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(op, p)
	}
	return pattern == op
}

func (m *profileModel) value(t *testing.T, n node) string {
	t.Helper()
	if n.str {
		return n.atom
	}
	if n.head() == "param" && len(n.list) == 2 && n.list[1].str {
		v, ok := m.params[n.list[1].atom]
		if !ok {
			t.Fatalf("profile reads parameter %q, which is not passed", n.list[1].atom)
		}
		return v
	}
	t.Fatalf("not a string or parameter: %s", n)
	return ""
}

func (m *profileModel) filter(t *testing.T, f node, q query) bool {
	t.Helper()
	switch f.head() {
	case "subpath", "literal":
		if q.path == "" || strings.HasPrefix(q.op, "network") {
			return false
		}
		v := m.value(t, f.list[1])
		if f.head() == "literal" {
			return q.path == v
		}
		return within(q.path, v)
	case "remote":
		if len(f.list) != 3 || f.list[1].atom != "unix-socket" {
			t.Fatalf("unknown remote filter %s", f)
		}
		if q.path == "" || !strings.HasPrefix(q.op, "network") {
			return false
		}
		inner := f.list[2]
		v := m.value(t, inner.list[1])
		switch inner.head() {
		case "subpath":
			return within(q.path, v)
		case "path-literal":
			return q.path == v
		}
		t.Fatalf("unknown unix-socket filter %s", inner)
	case "require-all":
		for _, c := range f.list[1:] {
			if !m.filter(t, c, q) {
				return false
			}
		}
		return true
	case "require-not":
		return !m.filter(t, f.list[1], q)
	case "require-any":
		for _, c := range f.list[1:] {
			if m.filter(t, c, q) {
				return true
			}
		}
		return false
	case "file-mode":
		// Seatbelt matches a file whose mode has every bit of the value.
		if len(f.list) != 2 || !strings.HasPrefix(f.list[1].atom, "#o") {
			t.Fatalf("file-mode takes one octal value: %s", f)
		}
		bits, err := strconv.ParseUint(strings.TrimPrefix(f.list[1].atom, "#o"), 8, 32)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return q.path != "" && q.mode&uint32(bits) == uint32(bits)
	case "socket-domain":
		return q.op == "system-socket" && q.addr == f.list[1].atom
	case "target", "sysctl-name", "sysctl-name-prefix", "global-name":
		// Not paths: the queries here never match them.
		return false
	}
	t.Fatalf("filter %s is not modeled", f)
	return false
}
