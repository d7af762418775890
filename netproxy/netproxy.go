// Package netproxy is the daemon-run proxy that is the only way out of a
// sandbox whose policy has network mode ALLOWLIST. One listening port speaks
// HTTP CONNECT, plain HTTP forward proxying and SOCKS5 (told apart by the
// first byte), checks every target against network.allow before resolving
// or dialing anything, resolves names itself so that the sandbox never
// chooses an address, and reports each refusal as a sandboxdv1.Denial.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Defaults for the zero values of the corresponding Config fields, and the
// limit on an HTTP request head.
const (
	DefaultDialTimeout      = 10 * time.Second
	DefaultHandshakeTimeout = 30 * time.Second
	DefaultMaxConns         = 256
	// MaxHeadBytes bounds an HTTP request line plus headers; a larger head
	// gets 431. It keeps one client from making the daemon buffer without end.
	MaxHeadBytes = 64 << 10
)

// Resolver looks names up. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config is what a Server enforces and how it reaches the outside.
type Config struct {
	// Allow is the policy's normalized network.allow list. A target host H
	// and port P are allowed iff some entry has policy.MatchHost(entry.Host,
	// H) and entry.Port is 0 or P. Nil entries are ignored.
	Allow []*sandboxdv1.NetworkAllow

	// Pinned maps operator-trusted names (typically from a hosts file read
	// with ParseHosts) to their addresses. It is consulted before Resolver,
	// and its addresses are used whatever they are, loopback included: the
	// operator, not DNS, vouched for them. Keys are matched
	// case-insensitively and without a trailing dot.
	Pinned map[string][]netip.Addr

	// Resolver resolves allowed names that are not pinned; nil means
	// net.DefaultResolver.
	Resolver Resolver

	// Dial connects to one resolved address ("ip:port", network "tcp").
	// Nil means a net.Dialer. It is never given a name to resolve.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// NAT64Prefix is the network's NAT64 prefix, if the operator named
	// one (sandboxd --nat64-prefix); one CheckNAT64Prefix refuses is
	// ignored. A resolved address under it, or under the well-known
	// 64:ff9b::/96, is refused as the IPv4 address it embeds would be. Under the
	// local-use 64:ff9b:1::/48 without it, every length's reading is
	// checked, so an allowed address there can be refused for what it
	// would embed at a length the network does not use.
	NAT64Prefix netip.Prefix

	// DialTimeout bounds resolving a target plus every connection attempt
	// to its addresses. Zero means DefaultDialTimeout.
	DialTimeout time.Duration

	// HandshakeTimeout is how long a client has to send an HTTP request
	// head (each one, on a kept-alive connection) or the SOCKS5 handshake
	// and request. Established tunnels have no idle timeout. Zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// MaxConns caps concurrent client connections, those of Serve and
	// ServeForward together; connections beyond it are closed as soon as
	// they are accepted. Zero means DefaultMaxConns.
	MaxConns int

	// Budget, if not nil, is shared with other Servers: every connection
	// to the outside (a tunnel, a forwarded HTTP request, a loopback
	// forward) is counted in it for BudgetKey while open, and one beyond
	// it is refused as a policy refusal is, with the denial's field naming
	// the quota.
	Budget    *Budget
	BudgetKey string

	// OnDenial, if not nil, is called for every refused target, from the
	// connection's goroutine; it must not block for long, since Close
	// waits for that goroutine.
	OnDenial func(*sandboxdv1.Denial)

	// Logf, if not nil, receives what the daemon's log should say: accept
	// errors it retries, recovered panics, and targets refused because the
	// proxy itself could not check them.
	Logf func(format string, args ...any)
}

// Server is an allowlist proxy. It may serve any number of listeners.
type Server struct {
	cfg      Config
	rules    []rule
	pinned   map[string][]netip.Addr
	resolver Resolver

	// ctx is cancelled by Close so that resolutions and dials in flight
	// stop instead of holding Close up for a whole DialTimeout.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // client and upstream connections
	clients   int
	wg        sync.WaitGroup // Serve calls and connection handlers
}

type rule struct {
	host string
	port uint32
}

// New returns a Server enforcing cfg. cfg.Allow and cfg.Pinned are copied.
func New(cfg Config) *Server {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if CheckNAT64Prefix(cfg.NAT64Prefix) != nil {
		cfg.NAT64Prefix = netip.Prefix{}
	}
	s := &Server{
		cfg:       cfg,
		pinned:    make(map[string][]netip.Addr, len(cfg.Pinned)),
		resolver:  cfg.Resolver,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	if s.resolver == nil {
		s.resolver = net.DefaultResolver
	}
	for _, a := range cfg.Allow {
		if a != nil {
			s.rules = append(s.rules, rule{host: a.GetHost(), port: a.GetPort()})
		}
	}
	for name, addrs := range cfg.Pinned {
		key := strings.ToLower(strings.TrimSuffix(name, "."))
		s.pinned[key] = append(s.pinned[key], addrs...)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Serve accepts connections on l and serves each in its own goroutine. It
// returns nil once l or the server is closed, and an error if accepting
// fails for any other lasting reason. Serve does not close l on that error;
// Close does.
func (s *Server) Serve(l net.Listener) error { return s.serve(l, s.handle) }

// ServeForward accepts connections on l as Serve does, counted against the
// same MaxConns and cut by the same Close, and joins each to a new
// connection to to. No policy check stands between them: the caller made
// l for a destination the policy names (the host's loopback port a
// sandbox reaches at its own).
func (s *Server) ServeForward(l net.Listener, to netip.AddrPort) error {
	return s.serve(l, func(c net.Conn) { s.join(c, to) })
}

func (s *Server) serve(l net.Listener, handle func(net.Conn)) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.isClosed() {
				return nil
			}
			if !retryable(err) {
				return fmt.Errorf("netproxy: accepting on %s: %w", l.Addr(), err)
			}
			// Out of descriptors or buffers: wait for connections to
			// finish rather than spin, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logf("netproxy: accepting on %s: %v; retrying in %v", l.Addr(), err, backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
			}
			continue
		}
		backoff = 0
		if !s.admit(c) {
			c.Close()
			continue
		}
		go func() {
			defer s.release(c)
			defer s.recoverPanic(c)
			handle(c)
		}()
	}
}

// Close closes every listener given to Serve and every client and upstream
// connection, and waits for Serve calls and connection goroutines to
// return. It may be called more than once, and concurrently with Serve.
// It always returns nil; the error is there to satisfy io.Closer.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ls := make([]net.Listener, 0, len(s.listeners))
	for l := range s.listeners {
		ls = append(ls, l)
	}
	cs := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()

	s.cancel()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
		c.Close()
	}
	s.wg.Wait()
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// admit registers a new client connection unless the server is closed or
// at MaxConns.
func (s *Server) admit(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.clients >= s.cfg.MaxConns {
		return false
	}
	s.clients++
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) release(c net.Conn) {
	c.Close()
	s.mu.Lock()
	s.clients--
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// charge counts a connection to target in the budget, if there is one,
// before it is resolved or dialled; a connection that is not then tracked
// is refunded.
func (s *Server) charge(target string) error {
	if s.cfg.Budget == nil {
		return nil
	}
	if d := s.cfg.Budget.take(s.cfg.BudgetKey, target); d != nil {
		return d
	}
	return nil
}

func (s *Server) refund() {
	if s.cfg.Budget != nil {
		s.cfg.Budget.give(s.cfg.BudgetKey)
	}
}

// track registers an upstream connection, charged for, so that Close can
// cut it and untrack refund it; it reports false, having closed c and
// refunded it, if the server is already closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		s.refund()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.refund()
}

// recoverPanic keeps a bug triggered by one sandbox's input from taking
// the daemon, and every other sandbox, down with it.
func (s *Server) recoverPanic(c net.Conn) {
	if v := recover(); v != nil {
		buf := make([]byte, 16<<10)
		buf = buf[:runtime.Stack(buf, false)]
		s.logf("netproxy: panic serving %s: %v\n%s", c.RemoteAddr(), v, buf)
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// retryable reports whether an accept error is a passing shortage rather
// than a broken listener.
func retryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
