// Package daemon is sandboxd's server: the session registry and state
// machine (Service, usable in-process and in tests without a socket) and a
// thin gRPC adapter that serves it on a unix socket, identifying callers by
// their peer credentials.
package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// Config configures a Service.
type Config struct {
	// Backend starts the sandboxes. Required.
	Backend launcher.Backend
	// SandboxUID and SandboxGID are the identity sandboxes run as when the
	// caller is root (a root caller never gets a root sandbox). Zero means
	// DefaultSandboxID.
	SandboxUID, SandboxGID uint32
	// SocketPath is where ListenAndServe listens; the backend hides it from
	// sandboxes.
	SocketPath string
	// Logf receives the daemon's log lines; nil discards them.
	Logf func(format string, args ...any)
	// PasswdFile is where sandbox users' home directories are looked up;
	// empty means /etc/passwd.
	PasswdFile string
	// SelfTestDir is where the self-test puts its fixtures. It must be
	// visible to sandboxes at the same path, so not under /tmp. Empty
	// means the socket's directory, else /var/tmp.
	SelfTestDir string
}

// Caller is who made a request, as the kernel reported it for the
// connection (never as the request claims).
type Caller struct {
	UID, GID uint32
	PID      int32
}

// retainEnded is how many ended sessions stay inspectable.
const retainEnded = 256

// DefaultSandboxID is the uid and gid of root callers' sandboxes. Not
// nobody (65534): inside a user namespace every host file whose owner is
// not mapped shows as the overflow id, 65534, so a sandbox running as
// nobody would look like the owner of all of root's files, and the backend
// could no longer tell them from its own.
const DefaultSandboxID = 65533

// Service holds the sessions and their logic. The gRPC adapter only
// translates to and from it.
type Service struct {
	cfg  Config
	logf func(format string, args ...any)

	mu       sync.Mutex
	sessions map[string]*session
	ended    []string // ids of ended sessions, oldest first
	hidden   []string // daemon sockets sandboxes must not reach
	closing  bool
	live     sync.WaitGroup // one per session handler still running

	selfTest        *sandboxdv1.SelfTest // the latest finished one
	selfTestRunning int
}

// New returns a Service starting sandboxes with cfg.Backend.
func New(cfg Config) (*Service, error) {
	if cfg.Backend == nil {
		return nil, errors.New("daemon: no sandbox backend configured")
	}
	if cfg.SandboxUID == 0 {
		cfg.SandboxUID = DefaultSandboxID
	}
	if cfg.SandboxGID == 0 {
		cfg.SandboxGID = DefaultSandboxID
	}
	if cfg.PasswdFile == "" {
		cfg.PasswdFile = "/etc/passwd"
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if cfg.SocketPath != "" {
		// Sandboxes resolve paths against their own root and working
		// directory: a relative socket path would hide nothing.
		abs, err := filepath.Abs(cfg.SocketPath)
		if err != nil {
			return nil, fmt.Errorf("daemon: socket path %q: %w", cfg.SocketPath, err)
		}
		cfg.SocketPath = abs
	}
	s := &Service{cfg: cfg, logf: logf, sessions: make(map[string]*session)}
	if cfg.SocketPath != "" {
		s.hidden = append(s.hidden, cfg.SocketPath)
	}
	return s, nil
}

// sandboxIdentity is the host identity a caller's sandbox runs as. Root is
// never passed on: a sandbox escape must not land as host root, and a gid 0
// would open root-group files to it.
func (s *Service) sandboxIdentity(c Caller) (uid, gid uint32) {
	uid, gid = c.UID, c.GID
	if uid == 0 {
		uid, gid = s.cfg.SandboxUID, s.cfg.SandboxGID
	}
	if gid == 0 {
		gid = s.cfg.SandboxGID
	}
	return uid, gid
}

func (s *Service) hide(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.hidden, path) {
		s.hidden = append(s.hidden, path)
	}
}

func (s *Service) hiddenSockets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hidden)
}

// add registers a new session and counts its handler as live.
func (s *Service) add(sess *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrShuttingDown
	}
	s.sessions[sess.id] = sess
	s.live.Add(1)
	return nil
}

// done records that sess has ended and its handler is finished, and forgets
// the oldest ended sessions beyond retainEnded.
func (s *Service) done(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, sess.id)
	for len(s.ended) > retainEnded {
		delete(s.sessions, s.ended[0])
		s.ended = s.ended[1:]
	}
	s.live.Done()
}

func (s *Service) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Service) lookup(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return sess, nil
}

// List returns every live session and the most recent ended ones, oldest
// first.
func (s *Service) List(ctx context.Context) []*sandboxdv1.SessionInfo {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b *session) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.id, b.id))
	})
	out := make([]*sandboxdv1.SessionInfo, len(all))
	for i, sess := range all {
		out[i] = sess.info()
	}
	return out
}

// Inspect returns one session.
func (s *Service) Inspect(ctx context.Context, id string) (*sandboxdv1.SessionInfo, error) {
	sess, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	return sess.info(), nil
}

// Kill ends session id (sig 0: every process of its sandbox, and the session
// ends KILLED by "operator") or delivers sig to its command without
// changing its state. Only root, the daemon's own user and the session's
// owner may do it.
func (s *Service) Kill(ctx context.Context, caller Caller, id string, sig int32) error {
	sess, err := s.lookup(id)
	if err != nil {
		return err
	}
	if caller.UID != 0 && caller.UID != sess.ownerUID && int64(caller.UID) != int64(os.Geteuid()) {
		return fmt.Errorf("kill session %s owned by uid %d: %w", id, sess.ownerUID, ErrPermissionDenied)
	}
	if sig == 0 {
		return sess.kill(reasonOperator)
	}
	if sig < 0 || sig > maxSignal {
		return &RequestError{Field: "signal", Msg: fmt.Sprintf("no such signal %d", sig)}
	}
	return sess.signal(syscall.Signal(sig))
}

// Shutdown refuses new sessions, kills every running sandbox and waits until
// each session has reported its end to its client, or until ctx is done.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	for _, sess := range all {
		// Sessions still starting see closing once running and kill
		// themselves.
		s.end(sess, reasonShutdown)
	}
	finished := make(chan struct{})
	go func() {
		s.live.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown: sessions still running: %w", ctx.Err())
	}
}

// maxSignal is the highest Linux signal number (SIGRTMAX).
const maxSignal = 64

func newSessionID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
