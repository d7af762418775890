package daemon

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// Quotas bound what one caller may hold of the daemon at once, so that one
// user of the socket cannot starve the others (of file descriptors, memory
// or launch capacity). A caller is a uid (a SID on Windows); on a session's
// own socket, the session, whose children count against their owner's
// Sessions as well (Service.add). Zero fields take the Default* values.
type Quotas struct {
	// Connections open to the daemon.
	Connections int
	// Streams open at once: Session and Watch.
	Streams int
	// Sessions not yet ended, detached ones included.
	Sessions int
	// Launches accepted and not yet running (waiting for a launch slot or
	// being built).
	Launches int
	// ProxyConnections open to the outside through the allowlist proxy
	// and the loopback forwards of the caller's sessions together
	// (counted for the uid that started each tree of sessions).
	ProxyConnections int
}

// Defaults of Quotas: far above what one interactive user or a worker
// supervisor does, far below what exhausts the daemon.
const (
	DefaultMaxConnections = 512
	DefaultMaxStreams     = 1024
	DefaultMaxSessions    = 1024
	DefaultMaxLaunches    = 256
	// Each connection to the outside costs the daemon two sockets and, while
	// spliced, two pipes: the daemon-wide 16384 hold about 100k
	// descriptors, a tenth of the unit's LimitNOFILE, and one caller may
	// hold a quarter of them.
	DefaultMaxProxyConnections = 4096
	DefaultProxyConnections    = 16384
)

// retryAfter is the hint given with a ResourceExhausted refusal.
const retryAfter = 200 * time.Millisecond

// QuotaError is the refusal of a caller at one of its quotas.
type QuotaError struct {
	msg string
	// Flag names the quota: the sandboxd flag that sets it.
	Flag string
	// Transient: the quota frees by itself soon (a launch, a stream or a
	// connection ends), so the client is told to retry; a caller at its
	// quota of live sessions is not, since those may run for days.
	Transient bool
}

func (e *QuotaError) Error() string { return e.msg }

func (q Quotas) withDefaults() Quotas {
	if q.Connections <= 0 {
		q.Connections = DefaultMaxConnections
	}
	if q.Streams <= 0 {
		q.Streams = DefaultMaxStreams
	}
	if q.Sessions <= 0 {
		q.Sessions = DefaultMaxSessions
	}
	if q.Launches <= 0 {
		q.Launches = DefaultMaxLaunches
	}
	if q.ProxyConnections <= 0 {
		q.ProxyConnections = DefaultMaxProxyConnections
	}
	return q
}

// usage is what one caller holds.
type usage struct {
	conns, streams, sessions, launches int
}

func (u usage) zero() bool { return u == usage{} }

// quotaKind names one of the counted resources, as the refusal and the
// flag say it.
type quotaKind int

const (
	quotaConns quotaKind = iota
	quotaStreams
	quotaSessions
	quotaLaunches
)

var (
	quotaFlags = [...]string{"connections", "streams", "sessions", "launches"}
	quotaHeld  = [...]string{"connections open", "streams open", "sessions not yet ended", "launches in flight"}
)

// quotas counts per caller and gates launches.
type quotas struct {
	limits Quotas
	mu     sync.Mutex
	held   map[string]*usage
	// slots bounds the launches being built at once across all callers:
	// building a sandbox is CPU-bound, and queueing the rest keeps the
	// daemon answering cheap calls while a burst is worked off.
	slots chan struct{}
}

func newQuotas(q Quotas) *quotas {
	return &quotas{limits: q.withDefaults(), held: make(map[string]*usage), slots: make(chan struct{}, 2*runtime.NumCPU())}
}

// quotaKey is who a quota is counted for.
func quotaKey(c Caller) string {
	switch {
	case c.Session != "":
		return "session " + c.Session
	case c.SID != "":
		return "sid " + c.SID
	}
	return "uid " + strconv.FormatUint(uint64(c.UID), 10)
}

func (u *usage) field(k quotaKind) *int {
	switch k {
	case quotaConns:
		return &u.conns
	case quotaStreams:
		return &u.streams
	case quotaSessions:
		return &u.sessions
	}
	return &u.launches
}

func (q *quotas) limit(k quotaKind) int {
	switch k {
	case quotaConns:
		return q.limits.Connections
	case quotaStreams:
		return q.limits.Streams
	case quotaSessions:
		return q.limits.Sessions
	}
	return q.limits.Launches
}

// acquire takes one of k for key, or refuses once key holds its quota.
func (q *quotas) acquire(key string, k quotaKind) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.held[key]
	if u == nil {
		u = &usage{}
		q.held[key] = u
	}
	n := u.field(k)
	if *n >= q.limit(k) {
		return &QuotaError{
			Flag:      "max-" + quotaFlags[k],
			msg:       fmt.Sprintf("quota reached: %s has %d %s, its quota (sandboxd --max-%s)", key, *n, quotaHeld[k], quotaFlags[k]),
			Transient: k != quotaSessions,
		}
	}
	*n++
	return nil
}

func (q *quotas) release(key string, k quotaKind) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.held[key]
	if u == nil {
		return
	}
	*u.field(k)--
	if u.zero() {
		delete(q.held, key)
	}
}

// launchSlot waits for one of the slots that bound concurrent launches,
// and returns its release.
func (q *quotas) launchSlot(ctx context.Context) (func(), error) {
	select {
	case q.slots <- struct{}{}:
		return func() { <-q.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a launch slot: %w", ctx.Err())
	}
}

// admitConn counts a connection of c's against its quota; release gives
// it back.
func (q *quotas) admitConn(c Caller) (release func(), err error) {
	key := quotaKey(c)
	if err := q.acquire(key, quotaConns); err != nil {
		return nil, err
	}
	return func() { q.release(key, quotaConns) }, nil
}

// streamQuota is a stream interceptor counting each caller's open streams.
func (q *quotas) streamQuota(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	caller, err := callerFrom(ss.Context())
	if err != nil {
		return toStatus(err)
	}
	key := quotaKey(caller)
	if err := q.acquire(key, quotaStreams); err != nil {
		return toStatus(err)
	}
	defer q.release(key, quotaStreams)
	return handler(srv, ss)
}
