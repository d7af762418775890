package launcherlinux

import (
	"errors"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// A child is built with its parent's mechanism set, or refused: on a host
// where network NONE cannot be had in a namespace, a network HOST parent
// on the namespaces set asking for a NONE child would otherwise get one on
// the landlock set, which shows the host's /tmp, /run and processes the
// parent never saw.
func TestChildRunsUnderItsParentsMechanismSet(t *testing.T) {
	b := &backend{host: probed(0, 7, PrimNetNS)}
	parent := pol(func(p *sandboxdv1.Policy) {
		p.Network.Mode = sandboxdv1.Network_HOST
		p.Children.Allow = true
	})
	req := launcher.PlanRequest{Policy: parent, Argv: []string{"sh"}, UID: 1000, GID: 1000, SessionSocket: "/run/s.sock"}
	sp, err := b.plan(req, nil)
	if err != nil || sp.Set != SetNamespaces {
		t.Fatalf("parent: %v, want the namespaces set", err)
	}
	child := pol(func(p *sandboxdv1.Policy) { p.Network.Mode = sandboxdv1.Network_NONE })
	req = launcher.PlanRequest{Policy: child, Argv: []string{"sh"}, UID: 1000, GID: 1000, Child: true, ParentMechanismSet: string(sp.Set)}
	sp, err = b.plan(req, nil)
	var u *launcher.Unenforceable
	if err == nil {
		t.Fatalf("network NONE child of a namespaces parent where netns fails: planned on the %s set, want a refusal", sp.Set)
	}
	if !errors.As(err, &u) || u.Field != "network.mode" || !strings.Contains(u.Found, "parent") {
		t.Fatalf("child refused with %v, want an Unenforceable naming network.mode and the parent's set", err)
	}
	// A child the parent's set can enforce runs under it.
	req.Policy = pol(func(p *sandboxdv1.Policy) { p.Network.Mode = sandboxdv1.Network_HOST })
	if sp, err = b.plan(req, nil); err != nil || sp.Set != SetNamespaces {
		t.Fatalf("network HOST child: %v, want the namespaces set", err)
	}
	// A child whose parent's set is not known is refused, never planned
	// by the automatic choice.
	req.ParentMechanismSet = ""
	if _, err = b.plan(req, nil); !errors.As(err, &u) {
		t.Fatalf("child without its parent's set: %v, want a refusal", err)
	}
}

// A child refused for what no mechanism set could give it here is not
// told that it runs under its parent's set: that is not the reason.
func TestChildRefusalNamesTheParentsSetOnlyWhenItIsTheReason(t *testing.T) {
	b := &backend{host: probed(0, 7, PrimCgroupMemory)}
	parent := pol(func(p *sandboxdv1.Policy) { p.Children.Allow = true })
	sp, err := b.plan(launcher.PlanRequest{Policy: parent, Argv: []string{"sh"}, UID: 1000, GID: 1000, SessionSocket: "/run/s.sock"}, nil)
	if err != nil {
		t.Fatalf("parent: %v", err)
	}
	child := pol(func(p *sandboxdv1.Policy) { p.Limits = &sandboxdv1.Limits{MemoryBytes: 1 << 30} })
	_, err = b.plan(launcher.PlanRequest{Policy: child, Argv: []string{"sh"}, UID: 1000, GID: 1000, Child: true, ParentMechanismSet: string(sp.Set)}, nil)
	var u *launcher.Unenforceable
	if !errors.As(err, &u) || u.Field != "limits.memory_bytes" {
		t.Fatalf("child with a memory limit where the host has no memory controller: %v, want a refusal naming limits.memory_bytes", err)
	}
	if strings.Contains(u.Found, "parent") {
		t.Errorf("a refusal every set gives names the parent's set: %q", u.Found)
	}
}
