package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
		{starting, killed, true},
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

func TestWindowsCallersSeeTheirOwnSessions(t *testing.T) {
	svc, err := New(Config{Backend: unusedBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	const alice, bob = "S-1-5-21-1-2-3-1001", "S-1-5-21-1-2-3-1002"
	mine := &session{id: "a", ownerSID: alice}
	theirs := &session{id: "b", ownerSID: bob}
	unix := &session{id: "u", ownerUID: 0}
	for _, tc := range []struct {
		name   string
		caller Caller
		want   []*session
	}{
		// Every Windows caller has uid 0; that must not make it root.
		{"user", Caller{SID: alice}, []*session{mine}},
		{"other user", Caller{SID: bob}, []*session{theirs}},
		{"admin", Caller{SID: "S-1-5-18", Admin: true}, []*session{mine, theirs, unix}},
		{"session pipe", Caller{SID: alice, Session: "b"}, []*session{theirs}},
	} {
		v := svc.viewOf(tc.caller)
		for _, sess := range []*session{mine, theirs, unix} {
			svc.sessions[sess.id] = sess
		}
		for _, sess := range []*session{mine, theirs, unix} {
			if got, want := svc.visibleLocked(v, sess), slices.Contains(tc.want, sess); got != want {
				t.Errorf("%s: session %s visible %v, want %v", tc.name, sess.id, got, want)
			}
		}
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

// The state directory is kept from sandboxes where it really is: a mask
// over a symlink to it would leave it reachable by its own path.
func TestStateDirIsProtectedResolved(t *testing.T) {
	// The temporary directory's own spelling may be through a link too
	// (macOS's /var, a Windows short name).
	real, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("no symlink here: %v", err)
	}
	s, err := New(Config{Backend: unusedBackend{}, StateDir: link})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := []string{real}; !slices.Equal(s.protect, want) {
		t.Errorf("protected %q, want %q", s.protect, want)
	}
}

// A socket is hidden where the sandbox finds it: write roots are
// symlink-free, so a socket under a symlinked directory (/var/run) kept
// at its spelling was neither refused under nor pinned by them.
func TestSocketPathsAreHiddenResolved(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "run")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("no symlink here: %v", err)
	}
	s, err := New(Config{Backend: unusedBackend{}, SocketPath: filepath.Join(link, "sandboxd", "sandboxd.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []string{filepath.Join(real, "sandboxd", "sandboxd.sock"), filepath.Join(real, "sandboxd", "sandboxd-sessions")}
	if got := s.hiddenSockets(); !slices.Equal(got, want) {
		t.Errorf("hidden sockets %q, want %q", got, want)
	}
	// The listener's name for it, which Serve hides too, is the same one.
	s.hide(filepath.Join(link, "sandboxd", "sandboxd.sock"))
	if got := s.hiddenSockets(); !slices.Equal(got, want) {
		t.Errorf("hidden sockets after the listener's %q, want %q", got, want)
	}
}

// A state directory others share is refused at start: every sandbox
// would lose it, and anyone there could write what the daemon obeys.
func TestSharedStateDirIsRefused(t *testing.T) {
	for _, dir := range []string{"/", os.TempDir()} {
		if s, err := New(Config{Backend: unusedBackend{}, StateDir: dir}); err == nil {
			s.Close()
			t.Errorf("state directory %s taken", dir)
		}
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

func TestUnsupportedIsUnimplemented(t *testing.T) {
	err := fmt.Errorf("signal 1 to session s: %w", errors.ErrUnsupported)
	if got := status.Code(toStatus(err)); got != codes.Unimplemented {
		t.Errorf("toStatus(%v) has code %v, want %v", err, got, codes.Unimplemented)
	}
}

func TestPermissionIsPermissionDenied(t *testing.T) {
	err := fmt.Errorf("filesystem.write[0] C:\\Windows is owned by another: %w", ErrPermission)
	if got := status.Code(toStatus(err)); got != codes.PermissionDenied {
		t.Errorf("toStatus(%v) has code %v, want %v", err, got, codes.PermissionDenied)
	}
}
