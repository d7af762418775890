package launcherlinux

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/launcher"
)

func TestLayerOfAHostTreeIsNotMapped(t *testing.T) {
	var u *launcher.Unenforceable
	if err := refuseMappedHostTrees([]string{"/etc"}, 65533); !errors.As(err, &u) || u.Field != "filesystem.layer" {
		t.Errorf("a layer of /etc for uid 65533: %v, want a refusal of filesystem.layer", err)
	}
	if err := refuseMappedHostTrees([]string{t.TempDir()}, 65533); err != nil {
		t.Errorf("a layer of a workspace: %v", err)
	}
}
