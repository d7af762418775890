package daemon

import (
	"context"
	"slices"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// The backend learns whether root started the session, or else which
// groups its caller has: what decides whose write roots the sandbox may be
// shown as its own.
func TestSpecNamesTheCallersAuthority(t *testing.T) {
	svc, err := New(Config{Backend: &fakeBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	start := &sandboxdv1.Start{Command: &sandboxdv1.Command{Argv: []string{"true"}}}
	_, spec, err := svc.prepare(context.Background(), Caller{UID: 1000, GID: 100, Groups: []uint32{4343}}, start)
	if err != nil {
		t.Fatal(err)
	}
	if spec.RootCaller || !slices.Equal(spec.CallerGroups, []uint32{100, 4343}) {
		t.Errorf("user's spec: RootCaller %v, CallerGroups %v; want false, [100 4343]", spec.RootCaller, spec.CallerGroups)
	}
	_, spec, err = svc.prepare(context.Background(), Caller{UID: 0, GID: 0, Groups: []uint32{4343}}, start)
	if err != nil {
		t.Fatal(err)
	}
	if !spec.RootCaller || spec.CallerGroups != nil {
		t.Errorf("root's spec: RootCaller %v, CallerGroups %v; want true and none", spec.RootCaller, spec.CallerGroups)
	}
}
