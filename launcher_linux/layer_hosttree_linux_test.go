package launcherlinux

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/launcher"
)

func TestLayerOfAHostTreeIsNotMapped(t *testing.T) {
	var u *launcher.Unenforceable
	if err := refuseMappedHostTrees([]string{"/etc"}, 65533, nil); !errors.As(err, &u) || u.Field != "filesystem.layer" {
		t.Errorf("a layer of /etc for uid 65533: %v, want a refusal of filesystem.layer", err)
	}
	if err := refuseMappedHostTrees([]string{t.TempDir()}, 65533, nil); err != nil {
		t.Errorf("a layer of a workspace: %v", err)
	}
}

// A layer over the daemon's shared identity files, or inside them, would
// show them, other sessions' included, as the sandbox uid's: refused as
// the host's trees are.
func TestLayerOfTheDaemonsFilesIsNotMapped(t *testing.T) {
	runtime := t.TempDir()
	own := []string{filepath.Join(runtime, "sandboxd-identity")}
	if err := os.Mkdir(own[0], 0o700); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{runtime, own[0]} {
		var u *launcher.Unenforceable
		err := refuseMappedHostTrees([]string{l}, 65533, own)
		if !errors.As(err, &u) || u.Field != "filesystem.layer" || !strings.Contains(u.Found, "daemon's") {
			t.Errorf("a layer of %s for uid 65533: %v, want a refusal of filesystem.layer", l, err)
		}
	}
	if err := refuseMappedHostTrees([]string{t.TempDir()}, 65533, own); err != nil {
		t.Errorf("a layer of a workspace: %v", err)
	}
}
