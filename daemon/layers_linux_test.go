package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// A session without layers leaves the layer store unopened: opening it
// the first time runs the storage library's overlay probes, which mount
// in the state directory, and a daemon killed during them leaves those
// mounts in the host's mount table. Every session opened it once, and
// killing daemons that had just started one left such mounts behind.
func TestSessionWithoutLayersOpensNoLayerStore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root daemon opens a layer store")
	}
	state := t.TempDir()
	h := startDaemon(t, func(c *Config) { c.StateDir = state })
	wantExit(t, h.open(cmd("/bin/true")).finish(), sandboxdv1.State_EXITED, 0, 0, "")
	h.stop()
	if _, err := os.Lstat(filepath.Join(state, "layers")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the layer store in %s after a session without layers: %v, want none", state, err)
	}
}
