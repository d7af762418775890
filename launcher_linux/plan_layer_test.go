package launcherlinux

import (
	"errors"
	"slices"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// A layered path is bound from its layer's merged directory, which the
// daemon hands over as it does an ID-mapped write root's, and the carve-outs and masks inside it are applied in the
// sandbox beneath the path, exactly as inside a write root.
func TestPlanLayerBindsMergedDirectoryWithCarveOuts(t *testing.T) {
	pol := policy.Normalize(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{"/out"},
		Layer:    []string{"/work"},
		ReadOnly: []string{"/work/.git", "/work/.agent"},
		Deny:     []string{"/work/.env"},
	}})
	// As the backend's Exists answers: inside the layer, what the merged
	// tree holds.
	host := fakeHost(7, []string{"/out", "/work", "/work/.git"}, []string{"/work/.env"})
	plan, err := BuildPlan(launcher.PlanRequest{Policy: pol, Argv: []string{"sh"}, UID: 1000, GID: 1000, Layered: []string{"/work"}}, host)
	if err != nil {
		t.Fatal(err)
	}
	find := func(kind MountKind, target string) *MountStep {
		for i := range plan.Mounts {
			if plan.Mounts[i].Kind == kind && plan.Mounts[i].Target == target {
				return &plan.Mounts[i]
			}
		}
		return nil
	}
	bind := find(MountBind, "/work")
	if bind == nil || bind.Source != "/work" || !bind.Idmapped || bind.Field != "filesystem.layer" {
		t.Fatalf("bind of /work = %+v, want one handed over (the layer's merged directory), for filesystem.layer", bind)
	}
	if out := find(MountBind, "/out"); out == nil || out.Source != "/out" || out.Idmapped {
		t.Errorf("bind of the write root /out = %+v", out)
	}
	if find(MountRebindReadOnly, "/work/.git") == nil || find(MountRebindReadOnly, "/work/.agent") == nil {
		t.Error("no read-only rebind of a carve-out inside the layer")
	}
	if find(MountMaskFile, "/work/.env") == nil {
		t.Error("no mask of the deny path inside the layer")
	}
	var placeholder *MountStep
	for i, s := range plan.Mounts {
		if s.Kind == MountPlaceholder {
			placeholder = &plan.Mounts[i]
		}
	}
	if placeholder == nil || placeholder.Source != "/work/.agent" || placeholder.Via != "/work" {
		t.Errorf("placeholder = %+v, want /work/.agent made through the handed-over layer", placeholder)
	}
	if !slices.Contains(plan.Exec.WriteRoots, "/work") {
		t.Errorf("write roots the init checks = %v, want /work among them", plan.Exec.WriteRoots)
	}
	if !slices.ContainsFunc(plan.Report, func(f *sandboxdv1.FieldEnforcement) bool { return f.GetField() == "filesystem.layer" }) {
		t.Error("the report does not say how filesystem.layer is enforced")
	}
	if !slices.ContainsFunc(plan.Exec.Landlock.Rules, func(r LandlockRule) bool { return r.Path == "/work" && r.Access&llWriteFile != 0 }) {
		t.Errorf("no landlock write rule for the layered path: %+v", plan.Exec.Landlock.Rules)
	}
}

func TestPlanLayerRefusals(t *testing.T) {
	pol := policy.Normalize(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{"/work"}}})
	landlock := fakeHost(7, []string{"/work"}, nil)
	landlock.Set = SetLandlock
	for name, c := range map[string]struct {
		host    Host
		layered []string
	}{
		"landlock set":   {landlock, []string{"/work"}},
		"no layer given": {fakeHost(7, []string{"/work"}, nil), nil},
	} {
		_, err := BuildPlan(launcher.PlanRequest{Policy: pol, Argv: []string{"sh"}, UID: 1000, GID: 1000, Layered: c.layered}, c.host)
		var u *launcher.Unenforceable
		if !errors.As(err, &u) || u.Field != "filesystem.layer" || u.Remedy == "" {
			t.Errorf("%s: %v, want a refusal of filesystem.layer with a remedy", name, err)
		}
	}
}
