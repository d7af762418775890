package doctor

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestPrint(t *testing.T) {
	r := &sandboxdv1.CapabilitiesReport{
		Backend: "linux",
		Host:    &sandboxdv1.HostFacts{Os: "linux", Kernel: "6.8.0-45-generic", Euid: 1000, Rootless: true, Container: "docker", LandlockAbi: 5},
		Probes: []*sandboxdv1.ProbeResult{
			{Name: "landlock", Ok: true, Operation: "landlock_create_ruleset(VERSION)", Detail: "ABI 5"},
			{Name: "user namespace", Operation: "clone(CLONE_NEWUSER)", Errno: "EPERM (operation not permitted)", Detail: "kernel.apparmor_restrict_unprivileged_userns=1"},
		},
		MechanismSets: []*sandboxdv1.MechanismSet{
			{Name: "namespaces", Description: "namespaces + Landlock + seccomp", Missing: []string{"user namespace: clone(CLONE_NEWUSER): EPERM"}},
			{Name: "landlock", Available: true, Description: "Landlock + seccomp"},
		},
		ForcedMechanismSet: "landlock",
		Features: []*sandboxdv1.FeatureSupport{
			{Feature: "filesystem.write", Enforceable: true, MechanismSet: "landlock", Enforcement: []*sandboxdv1.FieldEnforcement{
				{Field: "filesystem.write", Mechanism: "landlock abi 5"},
			}},
			{Feature: "network.mode=NONE", Refusal: &sandboxdv1.Unenforceable{
				Field: "network.mode", Mechanism: "network namespace or landlock abi 4", Found: "landlock abi 3",
				Probe: "clone(CLONE_NEWUSER|CLONE_NEWNET)", Errno: "EPERM (operation not permitted)", Remedy: "sysctl kernel.apparmor_restrict_unprivileged_userns=0",
			}},
		},
		SelfTest: &sandboxdv1.SelfTest{
			MechanismSet: "landlock",
			Ran:          timestamppb.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)),
			Checks: []*sandboxdv1.SelfTestCheck{
				{Name: "start", Ok: true, Detail: "started"},
				{Name: "tcp-loopback", Detail: "NOT denied"},
			},
		},
	}
	want := `backend: linux

host:
  os: linux
  kernel: 6.8.0-45-generic
  euid: 1000 (rootless)
  container: docker
  landlock ABI: 5

probes:
  ok   landlock: landlock_create_ruleset(VERSION)
       ABI 5
  FAIL user namespace: clone(CLONE_NEWUSER): EPERM (operation not permitted)
       kernel.apparmor_restrict_unprivileged_userns=1

mechanism sets (forced: landlock):
  namespaces: not available (namespaces + Landlock + seccomp)
    missing: user namespace: clone(CLONE_NEWUSER): EPERM
  landlock: available (Landlock + seccomp)

features:
  filesystem.write: enforceable yes, by landlock
    filesystem.write: landlock abi 5
  network.mode=NONE: enforceable no
    field: network.mode
    needs: network namespace or landlock abi 4
    found: landlock abi 3
    probe: clone(CLONE_NEWUSER|CLONE_NEWNET): EPERM (operation not permitted)
    remedy: sysctl kernel.apparmor_restrict_unprivileged_userns=0

self-test: FAILED (mechanism set landlock, ran 2026-03-04T05:06:07Z)
  ok   start: started
  FAIL tcp-loopback: NOT denied
`
	var out strings.Builder
	Print(&out, r)
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestPrintEmptyReport(t *testing.T) {
	var out strings.Builder
	Print(&out, &sandboxdv1.CapabilitiesReport{})
	for _, want := range []string{"backend: unknown", "host:\n  (not reported)", "probes:\n  (none reported)", "mechanism sets (chosen per policy):", "self-test: not run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

func TestSelfTestVerdict(t *testing.T) {
	for _, tc := range []struct {
		st   *sandboxdv1.SelfTest
		want string
	}{
		{nil, "not run"},
		{&sandboxdv1.SelfTest{Checks: []*sandboxdv1.SelfTestCheck{{Name: "pending"}}}, "pending"},
		{&sandboxdv1.SelfTest{Passed: true, MechanismSet: "namespaces"}, "passed (mechanism set namespaces)"},
		{&sandboxdv1.SelfTest{}, "FAILED"},
	} {
		if got := SelfTestVerdict(tc.st); got != tc.want {
			t.Errorf("SelfTestVerdict(%v) = %q, want %q", tc.st, got, tc.want)
		}
	}
}
