package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/transport"
)

// How long stopping may take: sandboxes are killed first, so these only
// bound a backend or client that does not let go.
const (
	shutdownWait = 10 * time.Second
	stopWait     = 5 * time.Second
)

// streamWindow is the flow-control window the daemon advertises per
// stream and per connection.
const streamWindow = 1 << 20

// streamWorkers is how many goroutines wait to serve streams: enough for
// the launches the daemon builds at once (quotas.slots) and their clients'
// next ones.
var streamWorkers = uint32(4 * runtime.NumCPU())

// DefaultKeepalive is how long a connection may be silent before the
// daemon pings it; one whose ping is not answered within a third of that
// is closed, with its streams.
const DefaultKeepalive = time.Minute

// Serve serves the Sandboxd service on lis until ctx is done, then kills
// every sandbox, waits for the sessions to report their end, and stops.
// Closing lis removes its socket file if it was made by net.Listen.
func (s *Service) Serve(ctx context.Context, lis net.Listener) error {
	if err := s.prepareSessionSocketDir(); err != nil {
		lis.Close()
		return err
	}
	if a, ok := lis.Addr().(*net.UnixAddr); ok && a.Name != "" {
		s.hide(a.Name)
	}
	srv := grpc.NewServer(
		grpc.Creds(transport.Credentials{Admit: s.quotas.admitConn}),
		grpc.ForceServerCodecV2(newRawCodec()),
		grpc.StreamInterceptor(s.quotas.streamQuota),
		// A peer that stopped answering (a client frozen or its host
		// suspended) is dropped instead of holding its streams forever.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: s.cfg.Keepalive, Timeout: s.cfg.Keepalive / 3}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: s.cfg.Keepalive / 4, PermitWithoutStream: true}),
		// Fixed windows for what clients send (stdin): no bandwidth
		// probing pings over a local socket. A client sets its own for
		// what the daemon sends (api/client does).
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(streamWindow),
		// One Output message of most clients (outputChunk) and its
		// framing fit a write; a large one takes a few. The buffer is each
		// connection's.
		grpc.WriteBufferSize(2*outputChunk),
		// Streams are served by goroutines kept for it, whose stacks have
		// already grown to what a Session handler needs, rather than each
		// by a new one that grows its stack copy by copy; when all are
		// busy (long sessions hold theirs), a stream gets a new goroutine
		// as without them.
		grpc.NumStreamWorkers(streamWorkers),
	)
	desc := decodingService(sandboxdv1grpc.Sandboxd_ServiceDesc)
	srv.RegisterService(&desc, &grpcServer{svc: s})
	sandboxdv1grpc.RegisterLayersServer(srv, &layersServer{svc: s})
	// Reflection lets operators poke at a live daemon with grpcurl.
	reflection.Register(srv)
	healthpb.RegisterHealthServer(srv, s.health)
	// Session sockets are served by the same server: one set of
	// handlers, the caller told apart by the socket alone.
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		serveErr = fmt.Errorf("serve %s: %w", lis.Addr(), err)
	}

	// From here on no new work is taken: say so before the wind-down.
	s.health.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		s.logf("%v", err)
	}
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(stopWait):
		srv.Stop()
	}
	return serveErr
}

// prepareSessionSocketDir makes Config.SessionSocketDir and removes the
// sockets a daemon that died left there (transport.PrepareSessionSocketDir),
// before any session: made with the first session allowing children, as it
// was for a daemon embedding Serve, a sandbox with a write root above it
// could have made it first. Once, as the sockets of sessions started
// since are not stale.
func (s *Service) prepareSessionSocketDir() error {
	s.sessionDir.Do(func() {
		if s.cfg.SessionSocketDir != "" {
			s.sessionDirErr = transport.PrepareSessionSocketDir(s.cfg.SessionSocketDir)
		}
	})
	return s.sessionDirErr
}

// ListenAndServe listens on Config.SocketPath (see Listen) and serves until
// ctx is done. Once listening it runs the self-test in the background and
// logs its result; Capabilities reports it pending until then.
func (s *Service) ListenAndServe(ctx context.Context) error {
	lis, activated, err := transport.Activated()
	if err != nil {
		return err
	}
	if activated {
		// The socket is systemd's (its path, mode and group in the
		// .socket unit); the daemon serves where it was handed one.
		s.cfg.SocketPath = lis.Addr().String()
	} else if lis, err = transport.Listen(s.cfg.SocketPath); err != nil {
		return err
	}
	// Before the self-test, which may open a session socket there.
	if err := s.prepareSessionSocketDir(); err != nil {
		lis.Close()
		return err
	}
	if s.socketGID != nil && !activated {
		if err := os.Chown(s.cfg.SocketPath, -1, int(*s.socketGID)); err != nil {
			lis.Close()
			return fmt.Errorf("socket group: %w", err)
		}
	}
	if activated {
		s.logf("listening on %s (socket activation)", s.cfg.SocketPath)
	} else {
		s.logf("listening on %s", s.cfg.SocketPath)
	}
	if s.audit != nil {
		s.logf("audit log %s", s.audit.Path())
	}
	mctx, stopMetrics := context.WithCancel(context.Background())
	defer stopMetrics()
	if s.cfg.MetricsAddr != "" {
		addr, done, err := s.serveMetrics(mctx, s.cfg.MetricsAddr)
		if err != nil {
			lis.Close()
			return err
		}
		defer func() {
			stopMetrics()
			<-done
		}()
		s.logf("metrics on http://%s/metrics", addr)
	}
	s.auditDaemon("started")
	defer s.auditDaemon("stopped")
	// Marked before serving, so no caller can see "not run" in between.
	s.selfTestStarting()
	stctx, cancel := context.WithCancel(ctx)
	var selfTest sync.WaitGroup
	selfTest.Go(func() { s.selfTestAtStart(stctx) })
	err = s.Serve(ctx, lis)
	// Nothing of the daemon may outlive ListenAndServe, a probe included.
	cancel()
	selfTest.Wait()
	return err
}
