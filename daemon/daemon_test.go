package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

func TestStateTransitions(t *testing.T) {
	const (
		starting = sandboxdv1.State_STARTING
		running  = sandboxdv1.State_RUNNING
		exited   = sandboxdv1.State_EXITED
		killed   = sandboxdv1.State_KILLED
		failed   = sandboxdv1.State_FAILED_TO_START
	)
	for _, tc := range []struct {
		from, to sandboxdv1.State
		ok       bool
	}{
		{starting, running, true},
		{starting, failed, true},
		{running, exited, true},
		{running, killed, true},
		{starting, exited, false},
		{running, failed, false},
		{exited, killed, false},
		{killed, exited, false},
		{failed, running, false},
		{running, running, false},
	} {
		if err := checkTransition(tc.from, tc.to); (err == nil) != tc.ok {
			t.Errorf("%v -> %v: err %v, want allowed=%v", tc.from, tc.to, err, tc.ok)
		}
	}
}

func TestHomeDir(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/sh\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"+
		"odd:x:77:77::relative:/bin/sh\n"+
		"short:x:88\n"), 0o644)
	for uid, want := range map[uint32]string{0: "/root", 65534: "/nonexistent", 77: "/", 88: "/", 1000: "/"} {
		if got := homeDir(passwd, uid); got != want {
			t.Errorf("homeDir(%d) = %q, want %q", uid, got, want)
		}
	}
	if got := homeDir(filepath.Join(t.TempDir(), "missing"), 0); got != "/" {
		t.Errorf("homeDir without a passwd file = %q", got)
	}
}

func TestRelativeSocketPathIsHiddenAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := New(Config{Backend: unusedBackend{}, SocketPath: "rel.sock"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "rel.sock"), filepath.Join(dir, "sandboxd-sessions")}
	if got := s.hiddenSockets(); !slices.Equal(got, want) {
		t.Errorf("hidden sockets %q, want %q: a sandbox resolves a relative path against its own root", got, want)
	}
}

// unusedBackend is for tests that construct a Service and start nothing.
type unusedBackend struct{}

func (unusedBackend) Name() string { return "unused" }

func (unusedBackend) Start(context.Context, launcher.Spec) (launcher.Process, error) {
	return nil, errors.New("unusedBackend starts nothing")
}

func (unusedBackend) Capabilities() *sandboxdv1.CapabilitiesReport {
	return &sandboxdv1.CapabilitiesReport{Backend: "unused"}
}
