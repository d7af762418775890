package selftest

import (
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestEvaluate(t *testing.T) {
	out := strings.Join([]string{
		`{"step":"write-root","ok":true,"err":""}`,
		`noise from somewhere`,
		`{"step":"write-outside","ok":false,"err":"read-only file system"}`,
		`{"step":"chmod-outside","ok":true,"err":""}`,
		`{"step":"read-deny","ok":true,"err":""}`,
		`{"step":"tcp-loopback","ok":false,"err":"connection refused"}`,
		`{"step":"tcp-loopback","ok":true,"err":""}`,
		`{"step":"non-root","ok":false,"err":"running as uid 0 euid 0"}`,
	}, "\n")
	got := map[string]*sandboxdv1.SelfTestCheck{}
	var order []string
	for _, c := range evaluate([]byte(out)) {
		got[c.GetName()] = c
		order = append(order, c.GetName())
	}
	if want := "write-root write-outside chmod-outside read-deny tcp-loopback unix-socket signal-daemon non-root"; strings.Join(order, " ") != want {
		t.Errorf("order %q, want %q", order, want)
	}
	for _, tc := range []struct {
		name   string
		ok     bool
		detail string
	}{
		{"write-root", true, "allowed"},
		{"write-outside", true, "denied: read-only file system"},
		{"chmod-outside", false, "NOT denied"},
		{"read-deny", false, "NOT denied"},
		// A second line for a step cannot overwrite the first.
		{"tcp-loopback", true, "denied: connection refused"},
		{"unix-socket", false, "no result"},
		{"non-root", false, "must be allowed: running as uid 0"},
	} {
		c := got[tc.name]
		if c.GetOk() != tc.ok || !strings.Contains(c.GetDetail(), tc.detail) {
			t.Errorf("%s: ok=%v %q; want ok=%v and %q", tc.name, c.GetOk(), c.GetDetail(), tc.ok, tc.detail)
		}
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		st   *sandboxdv1.SelfTest
		want string
	}{
		{nil, "self-test has not run"},
		{&sandboxdv1.SelfTest{Passed: true, MechanismSet: "namespaces"}, "self-test passed (mechanism set namespaces)"},
		{&sandboxdv1.SelfTest{MechanismSet: "landlock", Checks: []*sandboxdv1.SelfTestCheck{
			{Name: "start", Ok: true},
			{Name: "read-deny", Detail: "NOT denied"},
			{Name: "exit", Detail: "exited 2"},
		}}, "self-test FAILED (mechanism set landlock): read-deny: NOT denied; exit: exited 2"},
		{&sandboxdv1.SelfTest{}, "self-test FAILED: no checks ran"},
	} {
		if got := Summary(tc.st); got != tc.want {
			t.Errorf("Summary = %q, want %q", got, tc.want)
		}
	}
}

func TestPassedNeedsChecks(t *testing.T) {
	if passed(nil) {
		t.Error("no checks passed")
	}
	if passed([]*sandboxdv1.SelfTestCheck{{Ok: true}, {Ok: false}}) {
		t.Error("a failed check passed")
	}
}
