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
	"google.golang.org/grpc/health"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/auditlog"
	"github.com/sandboxd/sandboxd/internal/signum"
	"github.com/sandboxd/sandboxd/internal/transport"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/netproxy"
	"google.golang.org/grpc"
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
	// SessionSocketDir is where the sockets of sessions that may have
	// children are made. Empty means "sandboxd-sessions" beside SocketPath.
	SessionSocketDir string
	// SocketGroup names the group (or gid) the main socket belongs to, so
	// its members may connect (the socket is 0660). Empty leaves the
	// daemon's own group.
	SocketGroup string
	// OperatorsGroup names the group (or gid) whose members see every
	// session on the main socket and may kill it (SIGKILL, SIGTERM);
	// another's session they may not type into, signal otherwise or
	// settle the layers of (see view.operator). Others see their own.
	OperatorsGroup string
	// ScrollbackBytes bounds the output kept per session for attach. Zero
	// means DefaultScrollback.
	ScrollbackBytes int
	// StateDir is where the audit log is kept (audit.log, rotated by
	// size); empty keeps none. Two daemons cannot share one.
	StateDir string
	// AuditMaxBytes is the audit log's rotation size; zero means the
	// auditlog package's default.
	AuditMaxBytes int64
	// MetricsAddr, when set, is the TCP address ListenAndServe serves
	// Prometheus metrics on, at /metrics.
	MetricsAddr string
	// ProxyHosts pins names for the allowlist proxy's resolution: the
	// operator's word, used even where DNS answers would be refused
	// (loopback). Nil resolves every name through the host's resolver.
	ProxyHosts map[string][]netip.Addr
	// NAT64Prefix is the network's NAT64 prefix for the allowlist proxy's
	// rebinding check (netproxy.Config.NAT64Prefix); invalid means none.
	NAT64Prefix netip.Prefix
	// Quotas bound what one caller may hold at once.
	Quotas Quotas
	// ProxyConnections bounds the connections to the outside that the
	// allowlist proxies and loopback forwards of all sessions hold open
	// together; zero means DefaultProxyConnections.
	ProxyConnections int
	// RetainEnded and RetainEndedFor bound the ended sessions kept per
	// owner; zero means DefaultRetainEnded and DefaultRetainEndedFor.
	RetainEnded    int
	RetainEndedFor time.Duration
	// Keepalive is how long a connection may be silent before it is
	// pinged (see DefaultKeepalive); zero means DefaultKeepalive.
	Keepalive time.Duration
	// FirstMessageTimeout is how long a Session stream may take to send
	// its Start or Attach; zero means DefaultFirstMessageTimeout.
	FirstMessageTimeout time.Duration
}

// DefaultFirstMessageTimeout is how long a stream may take to say what it
// is for: a client sends its first message right after connecting.
const DefaultFirstMessageTimeout = 10 * time.Second

// DefaultScrollback is how much of a session's recent output an attaching
// client is shown by default.
const DefaultScrollback = 64 << 10

// Caller is who made a request, as the kernel reported it for the
// connection (never as the request claims).
type Caller = transport.Caller

// Ended sessions stay inspectable (state, exit code, scrollback) per
// owner, so that no caller's sessions can push another's out: each owner's
// last DefaultRetainEnded, for at most DefaultRetainEndedFor.
const (
	DefaultRetainEnded    = 256
	DefaultRetainEndedFor = 24 * time.Hour
)

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
	// health is the grpc.health.v1 service (health.go).
	health *health.Server
	// operators and socketGID are the gids of Config.OperatorsGroup and
	// Config.SocketGroup, nil when not set.
	operators, socketGID *uint32
	// socketInSandbox is where a sandbox finds its session socket.
	socketInSandbox func(host string) string

	mu       sync.Mutex
	sessions map[string]*session
	// children are the registered sessions started on each session's
	// socket, by the parent's id: a session's end finds its children
	// without a walk through every session kept.
	children map[string][]*session
	ended    map[string][]endedSession // per owner (ownerKey), oldest first
	hidden   []string                  // daemon sockets sandboxes must not reach
	// protect is the daemon's own state (Config.StateDir), which no
	// sandbox may read or change (launcher.Spec.Protect).
	protect []string
	closing bool
	live    sync.WaitGroup // one per session not yet ended
	srv     *grpc.Server   // serves session sockets; set by Serve
	// sessionDir is the making of Config.SessionSocketDir, done once
	// (prepareSessionSocketDir).
	sessionDir    sync.Once
	sessionDirErr error

	selfTest        *sandboxdv1.SelfTest // the latest finished one
	selfTestRunning int

	events  *eventBus
	audit   *auditlog.Log // nil without Config.StateDir
	metrics *metrics
	quotas  *quotas
	// proxyBudget bounds the sessions' connections to the outside, all
	// together and per caller (Config.ProxyConnections,
	// Quotas.ProxyConnections).
	proxyBudget *netproxy.Budget
	// auditHealth is the outcome of the audit log's latest write.
	auditHealth auditHealth
	// inputWatches counts the sessions whose input state is polled.
	inputWatches atomic.Int64
	// layers keeps the sessions' copy-on-write layers (layers.go).
	layers *layerStore
	// trim hands unused heap back once launches are quiet (heaptrim.go).
	trim *heapTrim
}

// New returns a Service starting sandboxes with cfg.Backend.
func New(cfg Config) (*Service, error) {
	if cfg.Backend == nil {
		return nil, errors.New("daemon: no sandbox backend configured")
	}
	if cfg.NAT64Prefix.IsValid() {
		if err := netproxy.CheckNAT64Prefix(cfg.NAT64Prefix); err != nil {
			return nil, fmt.Errorf("daemon: NAT64 prefix: %w", err)
		}
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
	if cfg.ScrollbackBytes <= 0 {
		cfg.ScrollbackBytes = DefaultScrollback
	}
	if cfg.RetainEnded <= 0 {
		cfg.RetainEnded = DefaultRetainEnded
	}
	if cfg.RetainEndedFor <= 0 {
		cfg.RetainEndedFor = DefaultRetainEndedFor
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.FirstMessageTimeout <= 0 {
		cfg.FirstMessageTimeout = DefaultFirstMessageTimeout
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
		if cfg.SessionSocketDir == "" {
			cfg.SessionSocketDir = filepath.Join(filepath.Dir(abs), "sandboxd-sessions")
		}
	}
	if cfg.SessionSocketDir != "" {
		abs, err := filepath.Abs(cfg.SessionSocketDir)
		if err != nil {
			return nil, fmt.Errorf("daemon: session socket directory %q: %w", cfg.SessionSocketDir, err)
		}
		cfg.SessionSocketDir = abs
	}
	s := &Service{cfg: cfg, logf: logf, sessions: make(map[string]*session), children: make(map[string][]*session), ended: make(map[string][]endedSession), socketInSandbox: func(h string) string { return h }, quotas: newQuotas(cfg.Quotas), health: newHealth(), trim: newHeapTrim()}
	proxyConns := cfg.ProxyConnections
	if proxyConns <= 0 {
		proxyConns = DefaultProxyConnections
	}
	s.proxyBudget = netproxy.NewBudget(proxyConns, "proxy-connections", s.quotas.limits.ProxyConnections, "max-proxy-connections")

	if p, ok := cfg.Backend.(launcher.SessionSocketPlacer); ok {
		s.socketInSandbox = p.SessionSocketPath
	}
	if runtime.GOOS == "windows" && (cfg.OperatorsGroup != "" || cfg.SocketGroup != "") {
		// Neither could be honoured: the pipe's security descriptor says
		// who may connect, and callers' tokens who is an administrator.
		return nil, errors.New("daemon: socket and operators groups are unix groups, not used on windows")
	}
	if cfg.OperatorsGroup != "" {
		gid, err := lookupGroup(cfg.OperatorsGroup)
		if err != nil {
			return nil, fmt.Errorf("daemon: operators %w", err)
		}
		s.operators = &gid
	}
	if cfg.SocketGroup != "" {
		gid, err := lookupGroup(cfg.SocketGroup)
		if err != nil {
			return nil, fmt.Errorf("daemon: socket %w", err)
		}
		s.socketGID = &gid
	}
	for _, p := range []string{cfg.SocketPath, cfg.SessionSocketDir} {
		if p != "" {
			// Where the sandbox finds it: the planner compares it with
			// write roots, which are symlink-free (a socket under
			// /var/run is in /run).
			s.hidden = append(s.hidden, protectedPath(p))
		}
	}
	if cfg.StateDir != "" {
		dir, err := stateDir(cfg.StateDir)
		if err != nil {
			return nil, fmt.Errorf("daemon: state directory %q: %w", cfg.StateDir, err)
		}
		s.protect = []string{dir}
	}
	if l, ok := cfg.Backend.(interface{ Leftovers() []string }); ok && len(l.Leftovers()) > 0 {
		logf("removed what a daemon that died had left on the host: %s", strings.Join(l.Leftovers(), ", "))
	}
	if l, ok := cfg.Backend.(interface{ LeftBehind() []string }); ok && len(l.LeftBehind()) > 0 {
		logf("left on the host what the journal of a daemon that died named but is not known to be its own: %s", strings.Join(l.LeftBehind(), ", "))
	}
	// Last: the audit log holds a lock that nothing after may leak.
	s.metrics = newMetrics(s)
	sinks := []eventSink{s.metrics.sink}
	if cfg.StateDir != "" {
		log, err := auditlog.Open(auditlog.Options{Dir: cfg.StateDir, MaxBytes: cfg.AuditMaxBytes})
		if err != nil {
			return nil, fmt.Errorf("daemon: audit log: %w", err)
		}
		s.audit = log
		orphans, err := closeOrphans(log, cfg.StateDir)
		if err != nil {
			log.Close()
			return nil, fmt.Errorf("daemon: audit log: recording the end of a previous daemon's sessions: %w", err)
		}
		if len(orphans) > 0 {
			logf("audit log: a previous daemon died with %d sessions not ended; recorded them as killed (%s): %v", len(orphans), reasonDaemonDied, orphans)
		}
		sinks = append(sinks, auditSink(log, logf, s.auditHealth.set))
	}
	s.events = newEventBus(sinks...)
	s.layers = newLayerStore(cfg.StateDir, logf)
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

// protectedPath is abs, an absolute path, as a sandbox must find it to be
// kept from it: through any symlinks, which a mask over the link would
// leave the target of reachable. What is not there yet is spelled after
// the longest part that is, resolved.
func protectedPath(abs string) string {
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(p) == p {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// stateDir makes dir, the daemon's state directory, and returns it
// absolute and resolved (protectedPath). One that others share is
// refused: every sandbox would lose it, and everyone else there could
// write what the daemon reads back.
func stateDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", err
	}
	real := protectedPath(abs)
	shared := []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm", "/home", "/run", "/var", "/etc", "/usr"}
	if home, err := os.UserHomeDir(); err == nil {
		shared = append(shared, home)
	}
	for _, d := range shared {
		if real == protectedPath(filepath.Clean(d)) {
			return "", fmt.Errorf("%s is a directory others share; give the daemon a directory of its own, such as %s", real, filepath.Join(real, "sandboxd"))
		}
	}
	if filepath.Dir(real) == real {
		return "", fmt.Errorf("%s is the root of a filesystem; give the daemon a directory of its own", real)
	}
	return real, nil
}

func (s *Service) hide(path string) {
	if filepath.IsAbs(path) {
		// As New keeps the configured ones: the listener names the
		// socket as it was spelled.
		path = protectedPath(path)
	}
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

// add registers a new session, started by caller, whose quota key is key,
// and counts it as live. A child is refused once its parent has ended:
// its subtree has been killed already.
func (s *Service) add(sess *session, caller Caller, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrShuttingDown
	}
	if sess.parentID != "" {
		if p := s.sessions[sess.parentID]; p == nil || p.closed {
			return fmt.Errorf("parent session %s has ended: %w", sess.parentID, ErrNotRunning)
		}
	}
	if err := s.quotas.acquire(key, quotaSessions); err != nil {
		return err
	}
	// A child counts against its owner too: each session socket has a
	// quota of its own, and a tree of them would give one user that quota
	// to the power of the tree's depth.
	if owner := sess.ownerKey(); owner != key {
		if err := s.quotas.acquire(owner, quotaSessions); err != nil {
			s.quotas.release(key, quotaSessions)
			return err
		}
	}
	sess.quota = key
	s.sessions[sess.id] = sess
	if sess.parentID != "" {
		s.children[sess.parentID] = append(s.children[sess.parentID], sess)
	}
	s.live.Add(1)
	s.trim.touch()
	// Under s.mu, so that a watch starting now either finds the session
	// in the registry with this event reflected, or gets the event.
	sess.announce(&caller)
	return nil
}

// close marks sess as ended, so no child can be added to it any more, and
// returns its children that are still registered.
func (s *Service) close(sess *session) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.closed = true
	return slices.Clone(s.children[sess.id])
}

// subtree returns sess's descendants, deepest first, then sess.
func (s *Service) subtree(sess *session) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*session
	var walk func(p *session)
	walk = func(p *session) {
		for _, c := range s.children[p.id] {
			walk(c)
		}
		out = append(out, p)
	}
	walk(sess)
	return out
}

// endedSession is a session kept after its end.
type endedSession struct {
	id    string
	ended time.Time
}

// ownerKey is whose retention an ended session counts against: its
// owner's, children included, never whoever made the most sessions.
func (sess *session) ownerKey() string {
	if sess.ownerSID != "" {
		return "sid " + sess.ownerSID
	}
	return "uid " + strconv.FormatUint(uint64(sess.ownerUID), 10)
}

// done records that sess has ended and reported it, and forgets its
// owner's oldest ended sessions beyond Config.RetainEnded.
func (s *Service) done(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas.release(sess.quota, quotaSessions)
	key := sess.ownerKey()
	if key != sess.quota {
		s.quotas.release(key, quotaSessions)
	}
	s.ended[key] = append(s.ended[key], endedSession{id: sess.id, ended: time.Now()})
	if l := s.ended[key]; len(l) > s.cfg.RetainEnded {
		for _, e := range l[:len(l)-s.cfg.RetainEnded] {
			s.forgetLocked(e.id)
		}
		// Not a copy of the rest, once an owner is at the limit a copy per
		// session ended: append moves the list to a new array when it
		// outgrows the old, and the forgotten entries go with the old.
		s.ended[key] = l[len(l)-s.cfg.RetainEnded:]
	}
	s.expireLocked()
	s.trim.touch()
	s.live.Done()
}

// expireLocked forgets the ended sessions older than
// Config.RetainEndedFor; s.mu is held.
func (s *Service) expireLocked() {
	cutoff := time.Now().Add(-s.cfg.RetainEndedFor)
	for key, l := range s.ended {
		n := 0
		for n < len(l) && l[n].ended.Before(cutoff) {
			s.forgetLocked(l[n].id)
			n++
		}
		switch {
		case n == len(l):
			delete(s.ended, key)
		case n > 0:
			s.ended[key] = l[n:]
		}
	}
}

// forgetLocked drops the ended session id from the registry; s.mu is
// held.
func (s *Service) forgetLocked(id string) {
	sess := s.sessions[id]
	if sess == nil {
		return
	}
	delete(s.sessions, id)
	if sess.parentID == "" {
		return
	}
	kids := slices.DeleteFunc(s.children[sess.parentID], func(c *session) bool { return c == sess })
	if len(kids) == 0 {
		delete(s.children, sess.parentID)
	} else {
		s.children[sess.parentID] = kids
	}
}

// List returns the sessions the caller may see, live ones and the most
// recent ended ones, oldest first.
func (s *Service) List(ctx context.Context, caller Caller) []*sandboxdv1.SessionInfo {
	v := s.viewOf(caller)
	s.mu.Lock()
	s.expireLocked()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if s.visibleLocked(v, sess) {
			all = append(all, sess)
		}
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

// Inspect returns one session the caller may see, with what its tasks wait
// on now and, when screen is set, what its terminal shows.
func (s *Service) Inspect(ctx context.Context, caller Caller, id string, screen bool) (*sandboxdv1.SessionInfo, error) {
	sess, err := s.lookupFor(caller, id)
	if err != nil {
		return nil, err
	}
	info := sess.info()
	info.Waits = sess.waits()
	if screen {
		info.Screen = sess.screenSnapshot()
	}
	return info, nil
}

// Kill ends session id and its subtree (sig 0: every process of their
// sandboxes, and each ends KILLED by "operator"), or delivers sig to its
// command without changing its state. The caller must see the session.
func (s *Service) Kill(ctx context.Context, caller Caller, id string, sig int32) error {
	sess, err := s.lookupFor(caller, id)
	if err != nil {
		return err
	}
	if err := s.maySignal(caller, sess, sig); err != nil {
		return err
	}
	if sig == 0 {
		// Children first: none of them outlives the kill of its parent
		// even for the moment the parent takes to be reaped.
		tree := s.subtree(sess)
		for _, t := range tree[:len(tree)-1] {
			s.end(t, reasonOperator)
		}
		return sess.kill(reasonOperator)
	}
	host, ok := signum.ToHost(sig)
	if !ok {
		return &RequestError{Field: "signal", Msg: fmt.Sprintf("no such signal %d here", sig)}
	}
	return sess.signal(host)
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
		// A session still starting has its launch abandoned, or, if the
		// launch completes all the same, is killed once it runs.
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

// Close releases what New acquired, the audit log, and what the backend
// holds for all sessions when it says so (io.Closer). Call it once the
// Service serves no more.
func (s *Service) Close() error {
	s.trim.stop()
	if c, ok := s.cfg.Backend.(io.Closer); ok {
		c.Close()
	}
	s.layers.close()
	// The summaries of denials not recorded are written while the log is
	// open, and no timer writes one after.
	s.events.close()
	if s.audit == nil {
		return nil
	}
	return s.audit.Close()
}

func newSessionID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
