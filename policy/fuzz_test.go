package policy

import (
	"math/big"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

var fuzzSeeds = []string{
	`{}`,
	`{"filesystem":{"write":["/w","/tmp"],"read_only":["/w/.git"],"deny":["/w/secret","/home/u/.ssh"]},
		"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com","port":443},{"host":"pypi.org"}]},
		"limits":{"timeout":"60s","memory_bytes":"1000","pids":100},"children":{"allow":true}}`,
	`{"filesystem":{"read":"LISTED","read_roots":["/usr","/etc","/w/docs"],"write":["/w"]},"children":{"allow":true}}`,
	`{"filesystem":{"write":["/"]},"network":{"mode":"HOST"},"children":{"allow":true}}`,
	`{"filesystem":{"write":["/a/../b","/b/c/","//d"],"read_only":["/b/c/e"],"deny":["/d/x","/d"]}}`,
	`{"network":{"mode":"ALLOWLIST","allow":[{"host":"::1","port":80},{"host":"0::1"},{"host":"A.B.c"},{"host":"*.b.c","port":1}]}}`,
	`{"limits":{"timeout":"1.5s","cpu_millis":500,"output_bytes":"10"}}`,
	`{"network":{}}`,
	`{"filesystem":{"read":"LISTED"}}`,
	`{"filesystem":{"read":"LISTED","readRoots":["/usr/lib","/w/x"],"write":["/w","/v"],"readOnly":["/w/a","/w/a/b"],"deny":["/v","/w/a/c"]}}`,
	`{"filesystem":{"write":["/w/x"],"read_only":["/w/x/y"],"deny":["/w/z"]},"network":{"mode":"NONE"},"limits":{"timeout":"30s","pids":10}}`,
	`{"filesystem":{"read":"LISTED","read_roots":["/w/x"]},"network":{"mode":"ALLOWLIST","allow":[{"host":"a.example.com","port":443}]},"children":{}}`,
	`{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.example.com"},{"host":"*.a.example.com","port":443},{"host":"10.0.0.1","port":22}]},"limits":{"timeout":"0.000000001s"}}`,
	`{"limits":{"timeout":"315576000000s","memory_bytes":"18446744073709551615","pids":4294967295,"cpu_millis":1,"output_bytes":"1"}}`,
	`{"network":{"mode":"ALLOWLIST","allow":[{"host":"Example.ORG.","port":443},{"host":"*.example.org."},{"host":"a.example.org"},{"host":"10.0.0.1","port":8080}]}}`,
	`{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.a.example.org.","port":80},{"host":"b.A.example.org","port":80},{"host":"localhost."},{"host":"::ffff:10.0.0.1"}]}}`,
	`{"network":{"mode":"ALLOWLIST","allow":[{"host":"*.org"}]}}`,
	`{"network":{"mode":"ALLOWLIST","allow":[{"host":"10.0.0.1."},{"host":"*.0.0.1"},{"host":"fe80::1%eth0"},{"host":"a..b"}]}}`,
}

// probes returns paths at which to compare what two policies allow: every
// path either mentions, plus a path below each.
func probes(ps ...*sandboxdv1.Policy) []string {
	out := []string{"/", "/probe"}
	for _, p := range ps {
		fs := p.GetFilesystem()
		for _, x := range slices.Concat(fs.GetReadRoots(), fs.GetWrite(), fs.GetReadOnly(), fs.GetDeny()) {
			x = filepath.Clean(x)
			out = append(out, x, filepath.Join(x, "probe"), filepath.Dir(x))
		}
	}
	return out
}

// access is an independent statement of the filesystem semantics in the
// package documentation, working on unnormalized policies.
func access(p *sandboxdv1.Policy, x string) (read, write bool) {
	fs := p.GetFilesystem()
	in := func(paths []string) bool {
		return slices.ContainsFunc(paths, func(r string) bool { return within(x, filepath.Clean(r)) })
	}
	if in(fs.GetDeny()) {
		return false, false
	}
	write = in(fs.GetWrite()) && !in(fs.GetReadOnly())
	read = fs.GetRead() != sandboxdv1.Filesystem_LISTED || in(fs.GetReadRoots()) || in(fs.GetWrite())
	return read, write
}

func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		checkPolicy(t, p)
	})
}

// checkPolicy checks the invariants every valid policy must satisfy.
func checkPolicy(t *testing.T, p *sandboxdv1.Policy) {
	t.Helper()
	before := proto.Clone(p)
	n := Normalize(p)
	if !proto.Equal(p, before) {
		t.Fatalf("Normalize modified its argument")
	}
	if err := Validate(n); err != nil {
		t.Fatalf("normalized policy is invalid: %v\n%s", err, text(n))
	}
	if nn := Normalize(n); !proto.Equal(nn, n) {
		t.Fatalf("Normalize is not idempotent:\n%s\n%s", text(n), text(nn))
	}
	for _, x := range probes(p) {
		r1, w1 := access(p, x)
		r2, w2 := access(n, x)
		if r1 != r2 || w1 != w2 {
			t.Fatalf("Normalize changed access to %q: read %v->%v write %v->%v\n%s\n%s", x, r1, r2, w1, w2, text(p), text(n))
		}
	}
	d := Digest(p)
	if Digest(n) != d {
		t.Fatalf("Digest differs after Normalize")
	}
	b, err := Encode(p)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	p2, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(Encode(p)): %v\n%s", err, b)
	}
	if Digest(p2) != d {
		t.Fatalf("Digest changed across Encode/Decode:\n%s", b)
	}
	// A policy never widens itself.
	self, err := Narrow(p, p)
	if err != nil {
		t.Fatalf("Narrow(p, p): %v\n%s", err, text(p))
	}
	if !proto.Equal(self, n) {
		t.Fatalf("Narrow(p, p) != Normalize(p):\n%s\n%s", text(self), text(n))
	}
}

func FuzzNarrow(f *testing.F) {
	for _, a := range fuzzSeeds {
		for _, b := range fuzzSeeds {
			f.Add([]byte(a), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, parentJSON, childJSON []byte) {
		parent, err := Decode(parentJSON)
		if err != nil {
			return
		}
		child, err := Decode(childJSON)
		if err != nil {
			return
		}
		checkNarrow(t, parent, child)
	})
}

// checkNarrow checks that when Narrow succeeds, its result is valid,
// normalized, a fixed point (Narrow(parent, result) == result) and allows
// nothing the parent does not.
func checkNarrow(t *testing.T, parent, child *sandboxdv1.Policy) {
	t.Helper()
	got, err := Narrow(parent, child)
	if err != nil {
		return
	}
	if err := Validate(got); err != nil {
		t.Fatalf("Narrow result is invalid: %v\n%s", err, text(got))
	}
	if !proto.Equal(Normalize(got), got) {
		t.Fatalf("Narrow result is not normalized:\n%s", text(got))
	}
	again, err := Narrow(parent, got)
	if err != nil {
		t.Fatalf("Narrow(parent, result): %v\nparent %s\nresult %s", err, text(parent), text(got))
	}
	if !proto.Equal(again, got) {
		t.Fatalf("Narrow(parent, result) != result:\n%s\n%s", text(again), text(got))
	}
	assertNotWider(t, parent, got)
}

// assertNotWider checks, independently of Narrow's code, that narrow allows
// nothing parent does not.
func assertNotWider(t *testing.T, parent, narrow *sandboxdv1.Policy) {
	t.Helper()
	for _, x := range probes(parent, narrow) {
		pr, pw := access(parent, x)
		nr, nw := access(narrow, x)
		if (nr && !pr) || (nw && !pw) {
			t.Fatalf("result allows more at %q: read %v>%v write %v>%v\nparent %s\nresult %s", x, nr, pr, nw, pw, text(parent), text(narrow))
		}
	}
	pn, nn := parent.GetNetwork(), narrow.GetNetwork()
	pmode := Normalize(parent).GetNetwork().GetMode()
	if modeRank[nn.GetMode()] > modeRank[pmode] {
		t.Fatalf("result network %v is wider than parent %v", nn.GetMode(), pmode)
	}
	if pmode == sandboxdv1.Network_ALLOWLIST {
		for _, a := range nn.GetAllow() {
			if !slices.ContainsFunc(pn.GetAllow(), func(b *sandboxdv1.NetworkAllow) bool {
				return (b.GetPort() == 0 || b.GetPort() == a.GetPort()) && MatchHost(b.GetHost(), a.GetHost())
			}) {
				t.Fatalf("result allows %v, which the parent does not", a)
			}
		}
	}
	pl, nl := parent.GetLimits(), narrow.GetLimits()
	limits := []struct {
		name string
		p, n uint64
	}{
		{"memory_bytes", pl.GetMemoryBytes(), nl.GetMemoryBytes()},
		{"pids", uint64(pl.GetPids()), uint64(nl.GetPids())},
		{"cpu_millis", uint64(pl.GetCpuMillis()), uint64(nl.GetCpuMillis())},
		{"output_bytes", pl.GetOutputBytes(), nl.GetOutputBytes()},
		{"timeout", uint64(pl.GetTimeout().AsDuration()), uint64(nl.GetTimeout().AsDuration())},
	}
	for _, l := range limits {
		if l.p != 0 && (l.n == 0 || l.n > l.p) {
			t.Fatalf("result limit %s %d is wider than parent's %d", l.name, l.n, l.p)
		}
	}
	if narrow.GetChildren().GetAllow() && !parent.GetChildren().GetAllow() {
		t.Fatalf("result allows children, parent does not")
	}
}

func FuzzParseAllow(f *testing.F) {
	for _, s := range []string{
		"example.org", "example.org:443", "Example.org.:443", "*.example.org:443", "*.org", "*", "*.0.0.1",
		"10.0.0.1:8080", "10.0.0.1.", "[::1]:8080", "::1", "[fe80::1%eth0]:1", "a..b:1", ":80", "[::1]:",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAllow(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), strconv.Quote(s)) {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		p := &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{a}}}
		if err := Validate(p); err != nil {
			t.Fatalf("ParseAllow(%q) = %v, which Validate rejects: %v", s, a, err)
		}
		checkPolicy(t, p)
		if !MatchHost(a.GetHost(), a.GetHost()) {
			t.Fatalf("MatchHost(%q, itself) is false", a.GetHost())
		}
		// Written back in command-line form, the entry parses the same.
		again := a.GetHost()
		if strings.Contains(again, ":") && a.GetPort() != 0 {
			again = "[" + again + "]"
		}
		if a.GetPort() != 0 {
			again += ":" + strconv.FormatUint(uint64(a.GetPort()), 10)
		}
		b, err := ParseAllow(again)
		if err != nil || !proto.Equal(a, b) {
			t.Fatalf("ParseAllow(%q) = %v, but ParseAllow(%q) = %v, %v", s, a, again, b, err)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "100", "64M", "64MiB", "64mb", "1.5G", "0.0009765625K", "16777215.999999999999999999T", "18446744073709551616", "-1", "1.5", "1iB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), strconv.Quote(s)) {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		// An independent statement of the meaning: the number, exactly,
		// times the unit's power of two, rounded down.
		i := strings.IndexAny(s, "kmgtibKMGTIB")
		if i < 0 {
			i = len(s)
		}
		r, ok := new(big.Rat).SetString(s[:i])
		if !ok {
			t.Fatalf("ParseSize(%q) = %d, but %q is no number", s, n, s[:i])
		}
		shift := map[byte]uint{'k': 10, 'm': 20, 'g': 30, 't': 40}[strings.ToLower(s[i:] + "b")[0]]
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), shift)))
		want := new(big.Int).Quo(r.Num(), r.Denom())
		if !want.IsUint64() || want.Uint64() != n {
			t.Fatalf("ParseSize(%q) = %d, want %v", s, n, want)
		}
	})
}
