package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/layers"
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

// The layers' refusals carry the code of their cause, not INTERNAL: a
// path moved since its layer was made is the caller's to put back, a
// file of another's its to leave alone, a daemon without layers cannot
// have them.
func TestLayerErrorsHaveTheirCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("layer of /w: moved: %w", layers.ErrPathChanged), codes.FailedPrecondition},
		{fmt.Errorf("layer of /w: no groups: %w", layers.ErrStale), codes.FailedPrecondition},
		{fmt.Errorf("commit /w/f: %w", layers.ErrNotOwner), codes.PermissionDenied},
		{fmt.Errorf("%w: no state directory", layers.ErrUnsupported), codes.Unimplemented},
		{fmt.Errorf("commit /w/d/f: %w: %w", layers.ErrOwnerMayNot, syscall.EACCES), codes.PermissionDenied},
		{fmt.Errorf("overlay of /w: create: %w", syscall.ENOSPC), codes.ResourceExhausted},
		{fmt.Errorf("commit /w/f: %w", syscall.EMFILE), codes.ResourceExhausted},
	} {
		wantCode(t, toStatus(layerErr(tc.err)), tc.code, tc.err.Error())
	}
	h := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := sandboxdv1grpc.NewLayersClient(h.conn).Diff(ctx, &sandboxdv1.DiffRequest{SessionId: "0123456789abcdef"})
	wantCode(t, err, codes.Unimplemented, "state directory")
}

// A layered path that is not a directory as named (through a symlink,
// missing) is the request's fault: INVALID_ARGUMENT naming its field.
func TestLayerOfABadPathIsAnInvalidArgument(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root daemon makes layers")
	}
	h := startDaemon(t, func(c *Config) { c.StateDir = t.TempDir() })
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "real"), 0o755))
	must(os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")))
	must(os.Mkdir(filepath.Join(dir, "real", "sub"), 0o755))
	for _, p := range []string{filepath.Join(dir, "link", "sub"), filepath.Join(dir, "missing")} {
		start := cmd("/bin/true")
		start.Policy = &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{p}}}
		s := h.open(start).finish()
		wantCode(t, s.err, codes.InvalidArgument, "filesystem.layer[0]")
	}
}
