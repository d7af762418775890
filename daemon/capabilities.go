package daemon

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/transport"
	"github.com/sandboxd/sandboxd/selftest"
)

// SelfTestTimeout bounds the self-test the daemon runs at start.
const SelfTestTimeout = 20 * time.Second

// Capabilities is the backend's report on this host with the latest
// self-test attached: nil before one has been started, a single "pending"
// check while the first one runs.
func (s *Service) Capabilities(ctx context.Context) *sandboxdv1.CapabilitiesReport {
	r := s.cfg.Backend.Capabilities()
	if r == nil {
		r = &sandboxdv1.CapabilitiesReport{Backend: s.cfg.Backend.Name()}
	} else {
		// The backend may hand out one shared report; the self-test is
		// ours to attach, not to write into it.
		r = proto.Clone(r).(*sandboxdv1.CapabilitiesReport)
	}
	r.Features = append(r.Features, s.layerFeature(r))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.selfTest != nil:
		r.SelfTest = proto.Clone(s.selfTest).(*sandboxdv1.SelfTest)
	case s.selfTestRunning > 0:
		r.SelfTest = &sandboxdv1.SelfTest{Checks: []*sandboxdv1.SelfTestCheck{{
			Name: "pending", Detail: "the self-test is still running",
		}}}
	}
	return r
}

// RunSelfTest runs the self-test (see package selftest) as the identity a
// root caller's sandbox gets, records the result for Capabilities and
// returns it.
func (s *Service) RunSelfTest(ctx context.Context) *sandboxdv1.SelfTest {
	s.selfTestStarting()
	return s.runSelfTest(ctx)
}

// runSelfTest runs the self-test selfTestStarting has announced.
func (s *Service) runSelfTest(ctx context.Context) *sandboxdv1.SelfTest {
	uid, gid := s.sandboxIdentity(Caller{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	st := selftest.Run(ctx, s.cfg.Backend, uid, gid, s.selfTestDir(uid, gid))
	s.selfTestDone(st)
	return st
}

// selfTestStarting marks a self-test as running, so Capabilities says
// "pending" instead of nothing until the first one has finished.
func (s *Service) selfTestStarting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.selfTestRunning++
}

func (s *Service) selfTestDone(st *sandboxdv1.SelfTest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.selfTestRunning--
	s.selfTest = st
	s.setHealth(st.GetPassed())
}

// selfTestDir picks where the fixtures go: Config.SelfTestDir as given (a
// bad one fails the self-test with the reason), else the socket's directory
// when sandboxes can see and search it, else /var/tmp. /tmp comes last:
// sandboxes see their own private /tmp, not the host's.
func (s *Service) selfTestDir(uid, gid uint32) string {
	if s.cfg.SelfTestDir != "" {
		return s.cfg.SelfTestDir
	}
	var candidates []string
	if s.cfg.SocketPath != "" {
		candidates = append(candidates, filepath.Dir(s.cfg.SocketPath))
	}
	candidates = append(candidates, "/var/tmp")
	for _, d := range candidates {
		if selftest.CheckDir(d, uid, gid) == nil {
			return d
		}
	}
	return os.TempDir()
}

// selfTestAtStart runs the self-test selfTestStarting has announced and logs every check and a
// summary, so an operator reading the daemon's log sees whether this host
// enforces what it claims to.
func (s *Service) selfTestAtStart(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, SelfTestTimeout)
	defer cancel()
	st := s.runSelfTest(ctx)
	for _, c := range st.GetChecks() {
		verdict := "ok  "
		if !c.GetOk() {
			verdict = "FAIL"
		}
		s.logf("self-test: %s %s: %s", verdict, c.GetName(), c.GetDetail())
	}
	s.logf("%s", selftest.Summary(st))
	// Ready, for systemd's Type=notify, once the daemon knows whether its
	// sandboxes hold; the health service says which.
	if err := transport.NotifyReady(selftest.Summary(st)); err != nil {
		s.logf("notify systemd: %v", err)
	}
}
