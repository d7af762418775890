package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/fdwait"
	"github.com/sandboxd/sandboxd/internal/signum"
	"github.com/sandboxd/sandboxd/internal/transport"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/netproxy"
	"github.com/sandboxd/sandboxd/policy"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// SessionStream is one session's bidirectional stream as the Service sees
// it; grpc.BidiStreamingServer[SessionRequest, SessionResponse] is one
// (its first message is received undecoded only from the Service's own
// server, rawReceiver).
type SessionStream interface {
	Context() context.Context
	Send(*sandboxdv1.SessionResponse) error
	Recv() (*sandboxdv1.SessionRequest, error)
}

// drainGrace is how long a read of output may wait once the sandbox has
// been reaped (see stdio.drain).
const drainGrace = 2 * time.Second

// readChunk is the most output one read takes, and one Output message to
// a client that takes large messages carries: with its framing, the
// message stays within largeOutputMessage. A message to any other client
// carries a part of it (outputDataLimit).
const readChunk = largeOutputMessage - outputFraming

// outputChunk is the most output one Output message to any other client
// carries, and one read takes where a read is a plain Read into a buffer
// the reader keeps (plainOutputReader).
const outputChunk = maxOutputMessage - outputFraming

// Session serves one stream for caller: a Start launches a sandbox, an
// Attach joins one. It returns when the client's part is over (the Exit
// sent, or Started for a detached session), or with an error when there is
// no Exit to send.
func (s *Service) Session(caller Caller, stream SessionStream) error {
	first, err := s.firstMessage(stream)
	if err != nil {
		return err
	}
	switch m := first.GetMsg().(type) {
	case *sandboxdv1.SessionRequest_Start:
		if err := checkStart(m.Start); err != nil {
			s.metrics.refused(err)
			return err
		}
		return s.start(caller, stream, m.Start)
	case *sandboxdv1.SessionRequest_Attach:
		if err := checkID("attach.id", m.Attach.GetId()); err != nil {
			return err
		}
		return s.attach(caller, stream, m.Attach)
	}
	return &RequestError{Field: "start", Msg: "the first message of a session must be Start or Attach"}
}

// firstMessage receives the Start or Attach of a stream. A client that
// sends none within Config.FirstMessageTimeout is not waited for: the
// stream would hold its share of the caller's quota for nothing.
//
// The goroutine that waits for it only receives: a gRPC stream's bytes are
// decoded here, on the handler's goroutine, whose stack (a stream worker's)
// has grown to what decoding a Start takes, rather than on a new
// goroutine's, which the runtime grew and copied twice for it (2 to 8 KiB)
// at every launch.
func (s *Service) firstMessage(stream SessionStream) (*sandboxdv1.SessionRequest, error) {
	type recv struct {
		req   *sandboxdv1.SessionRequest
		frame rawFrame
		err   error
	}
	raw, undecoded := rawReceiver(stream)
	got := make(chan recv, 1)
	go func() {
		if undecoded {
			var f rawFrame
			err := raw.RecvMsg(&f)
			got <- recv{frame: f, err: err}
			return
		}
		req, err := stream.Recv()
		got <- recv{req: req, err: err}
	}()
	t := time.NewTimer(s.cfg.FirstMessageTimeout)
	defer t.Stop()
	var r recv
	select {
	case r = <-got:
	case <-t.C:
		// Returning ends the stream, and with it the Recv above.
		return nil, fmt.Errorf("no Start or Attach within %v: %w", s.cfg.FirstMessageTimeout, ErrFirstMessageLate)
	}
	if errors.Is(r.err, io.EOF) {
		return nil, &RequestError{Field: "start", Msg: "the stream was closed before its first message (Start or Attach)"}
	}
	if r.err == nil && undecoded {
		r.req = &sandboxdv1.SessionRequest{}
		r.err = toStatus(decodeInto(r.frame, r.req))
	}
	if r.err != nil {
		return nil, fmt.Errorf("receive start: %w", r.err)
	}
	return r.req, nil
}

func (s *Service) start(caller Caller, stream SessionStream, start *sandboxdv1.Start) error {
	key := quotaKey(caller)
	if err := s.quotas.acquire(key, quotaLaunches); err != nil {
		s.metrics.refused(err)
		return err
	}
	release, err := s.quotas.launchSlot(stream.Context())
	if err != nil {
		s.quotas.release(key, quotaLaunches)
		return err
	}
	// The slot and the place in the caller's quota are the launch's: they
	// are given back once the sandbox runs (or will not), not held while
	// the session does.
	launchOver := sync.OnceFunc(func() {
		release()
		s.quotas.release(key, quotaLaunches)
	})
	defer launchOver()
	sess, spec, err := s.prepare(stream.Context(), caller, start)
	if err != nil {
		s.metrics.refused(err)
		return err
	}
	ctx := stream.Context()
	if sess.detached {
		// Nothing of the starting client's may end a detached session.
		ctx = context.WithoutCancel(ctx)
	}
	// Before the session can be found: a kill may come at once.
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	sess.abortLaunch = abort
	if err := s.add(sess, caller, key); err != nil {
		sess.socket.Close()
		sess.closeProxy()
		s.metrics.refused(err)
		return err
	}
	if err := s.recordStart(); err != nil {
		s.logf("session %s: refused: %v", sess.id, err)
		s.metrics.refused(err)
		exit, ferr := sess.startFailure(err)
		s.finished(sess, exit)
		if ferr != nil {
			return ferr
		}
		// Killed before the refusal: the kill, which its caller was told
		// of, is how the session ended.
		return stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: exit}})
	}
	// The timeout counts from the session's creation and may end its
	// launch too.
	stopTimeout := s.startTimeout(sess)
	proc, sio, exit, err := s.launch(ctx, sess, spec, start.GetWindow())
	launchOver()
	if proc == nil {
		stopTimeout()
		s.finished(sess, exit)
		if err != nil {
			return err
		}
		// Not a Started: the sandbox never ran a command, and the client
		// exits with the shell's 126/127 from this Exit.
		return stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: exit}})
	}
	var owner *viewer
	if !sess.detached {
		// Joined before any output is read, so the client gets all of it.
		owner, _, _ = sess.out.join(true)
	}
	// Started, Inspect and every attach show the one report the session
	// recorded, unless this client said it does not show it.
	started := &sandboxdv1.Started{SessionId: sess.id, PolicyDigest: sess.digest}
	if !start.GetOmitEnforcement() {
		started.Enforcement = sess.enforcementReport()
	}
	sendErr := stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: started}})
	// Logged once the client has its Started: formatting the line is
	// not the launch's.
	s.logf("session %s: started pid %d for %s (parent %q): %q", sess.id, proc.Pid(), sess.owner(), sess.parentID, sess.argv)
	go s.supervise(sess, proc, sio, stopTimeout)
	// The move to RUNNING is recorded (audit log, metrics) while the
	// command runs on, in the order of events (see deferred).
	s.events.flush()
	if sess.detached {
		return sendErr
	}
	// A failed send means the client is gone; relay sees its context end
	// and kills the sandbox.
	return s.relay(stream, sess, owner, true, true)
}

// prepare checks a Start and turns it into the session record and the spec
// for the backend. Validation happens here, once; the policy the backend
// gets, the one Inspect shows and the digest the sandbox sees are all the
// same normalized value. On a session's socket the policy is the parent's
// narrowed by the request.
func (s *Service) prepare(ctx context.Context, caller Caller, start *sandboxdv1.Start) (*session, launcher.Spec, error) {
	var (
		pol      *sandboxdv1.Policy
		parentID string
		// parentSet is the parent's mechanism set, which a child is
		// built with or refused (launcher.Spec.ParentMechanismSet).
		parentSet string
		// parent is the session on whose socket the child is asked for.
		parent   *session
		owner    uint32
		ownerSID string
		uid, gid uint32
		groups   []uint32
	)
	if caller.Session != "" {
		if start.GetLayerFrom() != "" {
			return nil, launcher.Spec{}, &RequestError{Field: "layer_from", Msg: "set, but a child sandbox cannot have layers"}
		}
		var err error
		if parent, err = s.lookupFor(caller, caller.Session); err != nil {
			return nil, launcher.Spec{}, err
		}
		// The parent's mechanism set and time left are known once its
		// launch is over.
		if err := parent.waitLaunched(ctx); err != nil {
			return nil, launcher.Spec{}, fmt.Errorf("parent: %w", err)
		}
		if pol, err = policy.Narrow(parent.policy, start.GetPolicy()); err != nil {
			return nil, launcher.Spec{}, fmt.Errorf("child policy: %w", err)
		}
		if err = parent.budget(pol); err != nil {
			return nil, launcher.Spec{}, fmt.Errorf("child policy: %w", err)
		}
		parentID, owner, ownerSID = parent.id, parent.ownerUID, parent.ownerSID
		parentSet = parent.enforcementReport().GetMechanismSet()
		uid, gid = parent.sandboxUID, parent.sandboxGID
		groups = parent.callerGroups
	} else {
		asked, err := s.withLayerFrom(caller, start)
		if err != nil {
			return nil, launcher.Spec{}, err
		}
		if err := policy.Validate(asked); err != nil {
			return nil, launcher.Spec{}, fmt.Errorf("invalid policy: %w", err)
		}
		pol = policy.Normalize(asked)
		if err := checkWriteRoots(caller, pol); err != nil {
			return nil, launcher.Spec{}, err
		}
		if err := checkLayerPaths(caller, pol); err != nil {
			return nil, launcher.Spec{}, err
		}
		owner, ownerSID = caller.UID, caller.SID
		uid, gid = s.sandboxIdentity(caller)
		if caller.UID != 0 {
			groups = append([]uint32{caller.GID}, caller.Groups...)
		}
	}
	pol, digest := sharedPolicy(pol)
	cmd := start.GetCommand()
	if err := checkCommand(cmd.GetArgv(), cmd.GetCwd()); err != nil {
		return nil, launcher.Spec{}, err
	}
	if err := checkWindow(start.GetWindow()); err != nil {
		return nil, launcher.Spec{}, err
	}
	home, root, err := s.sandboxDirs(uid)
	if err != nil {
		return nil, launcher.Spec{}, err
	}
	cwd := cmd.GetCwd()
	if cwd == "" {
		cwd = root
	}
	id, err := newSessionID()
	if err != nil {
		return nil, launcher.Spec{}, err
	}
	sess := &session{
		id:         id,
		ownerUID:   owner,
		ownerSID:   ownerSID,
		parentID:   parentID,
		sandboxUID: uid,
		sandboxGID: gid,
		argv:       cmd.GetArgv(),
		cwd:        cwd,
		tty:        start.GetTty(),
		detached:   start.GetDetach(),
		policy:     pol,
		digest:     digest,
		created:    time.Now(),
		events:     s.events,
		state:      sandboxdv1.State_STARTING,
		out:        newBroadcast(s.cfg.ScrollbackBytes),
		// The starting client holds the input until it leaves; a detached
		// session waits for an interactive attach.
		interactive: !start.GetDetach(),
	}
	sess.callerGroups = groups
	sess.tree = id
	if parent != nil {
		sess.tree = parent.tree
	}
	sess.layerFrom = start.GetLayerFrom()
	if d := pol.GetLimits().GetTimeout().AsDuration(); d > 0 {
		sess.deadline = sess.created.Add(d)
	}
	if parent != nil {
		sess.outCap = parent.childOutputCap(pol.GetLimits().GetOutputBytes(), sess.tty)
	} else if n := pol.GetLimits().GetOutputBytes(); n != 0 {
		sess.outCap = &outputCap{limit: n, tty: sess.tty}
	}
	ids := sessionIdentity{id: id, digest: digest}
	if pol.GetChildren().GetAllow() {
		if sess.socket, err = s.openSessionSocket(id, uid, gid); err != nil {
			return nil, launcher.Spec{}, err
		}
		ids.socket = s.socketInSandbox(sess.socket.Path())
	}
	if pol.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
		ids.proxy = launcher.ProxyAddress
	}
	env, err := buildEnv(start.GetTty(), home, cmd.GetEnv(), ids)
	if err != nil {
		sess.socket.Close()
		return nil, launcher.Spec{}, err
	}
	spec := launcher.Spec{
		ParentSessionID:    parentID,
		ParentMechanismSet: parentSet,
		SessionID:          id,
		Policy:             pol,
		Digest:             digest,
		Argv:               sess.argv,
		Env:                env,
		Cwd:                cwd,
		UID:                uid,
		GID:                gid,
		HideSockets:        s.hiddenSockets(),
		Protect:            s.protect,
		OnDenial:           sess.denied,
		RootCaller:         owner == 0,
		CallerGroups:       groups,
	}
	if sess.socket != nil {
		spec.SessionSocket = sess.socket.Path()
	}
	// A backend without the proxy refuses ALLOWLIST as it plans; nothing
	// is built for it first.
	if ids.proxy != "" && launcher.NeedsOf(s.cfg.Backend).Proxy {
		sess.proxy = s.newProxy(sess, pol.GetNetwork().GetAllow())
		spec.Proxy = func(l net.Listener) {
			if err := sess.proxy.Serve(l); err != nil {
				s.logf("session %s: proxy: %v", id, err)
			}
		}
		spec.Forward = func(l net.Listener, to netip.AddrPort) {
			if err := sess.proxy.ServeForward(l, to); err != nil {
				s.logf("session %s: forward to %s: %v", id, to, err)
			}
		}
	}
	return sess, spec, nil
}

// newProxy is the allowlist proxy of sess, which serves its loopback
// forwards too. Its connections to the outside count in the daemon's
// budget for the uid (a SID on Windows) that started sess's tree: a
// child's count against its owner's, as its sessions do.
func (s *Service) newProxy(sess *session, allow []*sandboxdv1.NetworkAllow) *netproxy.Server {
	logf := func(format string, args ...any) { s.logf("session %s: "+format, append([]any{sess.id}, args...)...) }
	return netproxy.New(netproxy.Config{
		Allow:       allow,
		Pinned:      s.cfg.ProxyHosts,
		NAT64Prefix: s.cfg.NAT64Prefix,
		Budget:      s.proxyBudget,
		BudgetKey:   sess.owner(),
		OnDenial:    sess.denied,
		Logf:        logf,
	})
}

// openSessionSocket makes the socket of a session whose policy allows
// children. Without a server (the Service used in-process) there is
// nothing to serve it with, and the policy cannot be enforced as asked.
func (s *Service) openSessionSocket(id string, uid, gid uint32) (*transport.SessionSocket, error) {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil || s.cfg.SessionSocketDir == "" {
		return nil, &launcher.Unenforceable{
			Field:     policy.FieldChildrenAllow,
			Mechanism: "a socket for the session",
			Found:     "the daemon is not serving on a socket",
			Remedy:    "start sessions that may have children through a daemon listening on a socket",
		}
	}
	return transport.OpenSessionSocket(srv, s.cfg.SessionSocketDir, id, uid, gid)
}

// launch starts the sandbox. When it could not, the returned Process is
// nil and either the Exit for the client or the error is set; the session
// has been moved to FAILED_TO_START.
func (s *Service) launch(ctx context.Context, sess *session, spec launcher.Spec, win *sandboxdv1.WindowSize) (launcher.Process, *stdio, *sandboxdv1.Exit, error) {
	// A quiet output waits in the shared waiter: a daemon that cannot
	// make it (out of descriptors) refuses the launch and says why,
	// rather than keep a goroutine on each output of every session.
	if err := fdwait.Ready(); err != nil && !errors.Is(err, fdwait.ErrUnsupported) {
		exit, ferr := sess.startFailure(fmt.Errorf("start sandbox: %w", err))
		return nil, nil, exit, ferr
	}
	sio, err := openStdio(sess.tty, win, drainGrace)
	if err != nil {
		exit, ferr := sess.startFailure(err)
		return nil, nil, exit, ferr
	}
	spec.Stdio = sio.child
	err = s.makeLayers(sess, &spec)
	if err == nil {
		// A kill that came before this, while the layers were made or the
		// start record checked, ends the launch here rather than after the
		// backend has built a sandbox to kill.
		err = context.Cause(ctx)
	}
	var proc launcher.Process
	if err == nil {
		proc, err = s.cfg.Backend.Start(ctx, spec)
	}
	sio.closeChild()
	if err != nil {
		s.dropLayers(sess)
		sio.closeAll()
		s.logf("session %s: start %q: %v", sess.id, sess.argv[0], err)
		exit, ferr := sess.startFailure(err)
		return nil, nil, exit, ferr
	}
	fail := func(err error) (launcher.Process, *stdio, *sandboxdv1.Exit, error) {
		proc.Kill()
		proc.Wait()
		s.dropLayers(sess)
		sio.closeAll()
		exit, ferr := sess.startFailure(err)
		return nil, nil, exit, ferr
	}
	if sess.tty {
		if err := sio.adoptTerminal(proc.Terminal()); err != nil {
			return fail(err)
		}
	}
	killed, err := sess.running(proc, proc.Enforcement(), sio)
	if err != nil {
		// Only this goroutine moves a STARTING session, so this means a bug;
		// even then no sandbox is left behind.
		return fail(err)
	}
	s.endIfOver(sess, killed)
	return proc, sio, nil, nil
}

// endIfOver ends sess, just moved to RUNNING, when it was killed while it
// was STARTING (killed is the reason), when its parent has ended or when
// the daemon shuts down. The parent and shutdown are looked at under s.mu:
// a parent that ends after this sees sess RUNNING among its children and
// kills it itself (finished). The kill is not: a backend's may be slow,
// and s.mu would hold up every other request meanwhile.
func (s *Service) endIfOver(sess *session, killed string) {
	reason := killed
	s.mu.Lock()
	if reason == "" && sess.parentID != "" {
		if p := s.sessions[sess.parentID]; p == nil || p.closed {
			reason = reasonParentEnded
		}
	}
	if reason == "" && s.closing {
		reason = reasonShutdown
	}
	s.mu.Unlock()
	if reason != "" {
		s.end(sess, reason)
	}
}

// startTimeout ends sess for its limits.timeout at its deadline, STARTING
// or running, and returns what stops that.
func (s *Service) startTimeout(sess *session) (stop func() bool) {
	if sess.deadline.IsZero() {
		return func() bool { return false }
	}
	return time.AfterFunc(time.Until(sess.deadline), func() { s.end(sess, reasonTimeout) }).Stop
}

// supervise runs a started session to its end, whoever watches it: it
// pumps the output to the viewers and the scrollback, reaps the sandbox
// and reports the Exit; stopTimeout stops the session's timeout
// (startTimeout) once it has ended. What follows the end runs once the
// sandbox has ended; no goroutine waits for it meanwhile where the backend
// can say when that is.
func (s *Service) supervise(sess *session, proc launcher.Process, sio *stdio, stopTimeout func() bool) {
	stopLayerSize := s.watchLayerSize(sess)
	stopInput := s.watchInput(sess, sio)
	s.startScreen(sess, sio)
	sio.startPumps(func(out *sandboxdv1.Output) {
		if sio.screen != nil {
			sio.screen.Feed(out.GetData())
		}
		keep, marker, by := sess.outCap.admit(out)
		if keep != nil {
			sess.out.publish(keep)
		}
		if marker != nil {
			sess.out.publish(marker)
			sess.denied(&sandboxdv1.Denial{
				Time: timestamppb.Now(), Field: policy.FieldLimitsOutputBytes, Operation: "write",
				Target: streamName(out.GetStream(), sess.tty),
				Detail: sess.outCap.droppedDetail(by),
			})
		}
		sess.active()
	})
	ended := func() {
		defer sio.closeAll()
		defer stopTimeout()
		st, waitErr := proc.Wait()
		stopLayerSize()
		s.releaseLayers(sess)
		sess.markWaited()
		stopInput()
		sio.drain()
		sio.waitPumps()
		if sio.screen != nil {
			sio.screen.Close()
		}
		exit, err := sess.finish(st, waitErr)
		if err != nil {
			s.logf("%v", err)
			exit = &sandboxdv1.Exit{State: sess.info().GetState(), ExitCode: 125, Reason: err.Error()}
		}
		// The viewers get the Exit first (finished ends the output again, a
		// no-op): the line is the daemon's, not the client's wait.
		sess.out.end(exit)
		s.logf("session %s: %s code %d signal %d %s", sess.id, exit.GetState(), exit.GetExitCode(), exit.GetSignal(), exit.GetReason())
		s.finished(sess, exit)
	}
	if n, ok := proc.(launcher.ExitNotifier); ok && n.NotifyExit(ended) == nil {
		return
	}
	ended()
}

// finished tells the viewers how sess ended, closes its socket, ends its
// subtree and lets it go. exit is nil when the session failed to start
// with an error instead of an Exit.
func (s *Service) finished(sess *session, exit *sandboxdv1.Exit) {
	if exit == nil {
		in := sess.info()
		exit = &sandboxdv1.Exit{State: in.GetState(), ExitCode: 125, Reason: in.GetReason()}
	}
	sess.out.end(exit)
	sess.socket.Close()
	sess.closeProxy()
	for _, child := range s.close(sess) {
		s.end(child, reasonParentEnded)
	}
	s.done(sess)
}

// relay streams a session's output from viewer v to a client until the
// session ends (then the Exit) or the client goes. An interactive client's
// messages reach the session; owner marks the client that started a
// session it did not detach, whose leaving kills the sandbox.
func (s *Service) relay(stream SessionStream, sess *session, v *viewer, interactive, owner bool) error {
	ctx := stream.Context()
	limit := outputDataLimit(ctx)
	if interactive {
		defer sess.releaseInput()
	}
	bad := make(chan error, 1)
	go func() { bad <- s.forwardInput(stream, sess, interactive, owner) }()
	leave := func() {
		sess.out.leave(v)
		if owner {
			// Not detached: a sandbox whose client is gone would run
			// unobserved and unkillable by that client.
			s.end(sess, reasonDisconnected)
		}
	}
	for {
		select {
		case o, ok := <-v.ch:
			if !ok {
				exit, err := sess.out.result(v)
				if err != nil {
					return err
				}
				return stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: exit}})
			}
			v.took(o)
			if err := sendOutput(stream, o, limit); err != nil {
				leave()
				return err
			}
		case err := <-bad:
			if err != nil {
				// A client that breaks the protocol is told so and
				// leaves, as any client that goes away does.
				leave()
				return err
			}
			// Its input is over; the output still goes to it.
			bad = nil
		case <-ctx.Done():
			leave()
			return ctx.Err()
		}
	}
}

// forwardInput relays a client's messages after its first until the stream
// ends. It returns nil when Recv fails, at the latest when the handler has
// returned and gRPC cancels the stream, and the error for a message that
// breaks the protocol: a second Start or Attach, a signal or window size
// that does not exist, a request that cannot be decoded. A read-only client's input,
// resizes and signals are read and dropped.
func (s *Service) forwardInput(stream SessionStream, sess *session, interactive, owner bool) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			// The starting client's half-close says it has no more input.
			// A pipe reader should see EOF then rather than wait forever;
			// a terminal stays open, since ^D means more than EOF to
			// programs reading it raw. An attached client's half-close
			// means nothing: it may only be watching.
			if errors.Is(err, io.EOF) && owner && !sess.tty {
				s.withInput(sess, (*stdio).closeStdin)
			}
			if undecodable(err) {
				return err
			}
			return nil
		}
		switch req.GetMsg().(type) {
		case *sandboxdv1.SessionRequest_Start, *sandboxdv1.SessionRequest_Attach:
			return &RequestError{Field: "start", Msg: "a stream carries one session: only its first message may be a Start or an Attach"}
		}
		if !interactive {
			continue
		}
		switch m := req.GetMsg().(type) {
		case *sandboxdv1.SessionRequest_Stdin:
			if data := m.Stdin.GetData(); len(data) > 0 {
				s.withInput(sess, func(in *stdio) error { return in.write(data) })
			}
			if m.Stdin.GetEof() {
				s.withInput(sess, (*stdio).closeStdin)
			}
		case *sandboxdv1.SessionRequest_Signal:
			sig, ok := signum.ToHost(m.Signal.GetSignal())
			if !ok {
				return &RequestError{Field: "signal.signal", Msg: fmt.Sprintf("no such signal %d here", m.Signal.GetSignal())}
			}
			s.report(sess, sess.signal(sig))
		case *sandboxdv1.SessionRequest_Resize:
			if err := checkWindow(m.Resize); err != nil {
				return err
			}
			s.withInput(sess, func(in *stdio) error { return in.resize(m.Resize) })
		}
	}
}

// withInput applies f to the session's input while it runs.
func (s *Service) withInput(sess *session, f func(*stdio) error) {
	in, err := sess.stdin()
	if err == nil {
		err = f(in)
		sess.active()
	}
	s.report(sess, err)
}

// end kills sess's sandbox for reason. A sandbox that has already ended is
// not an error: the timer, the client and shutdown may all race its exit.
func (s *Service) end(sess *session, reason string) {
	if err := sess.kill(reason); err != nil && !errors.Is(err, ErrNotRunning) {
		s.logf("session %s: %v", sess.id, err)
	}
}

// report logs errors of relaying input. They are expected when the command
// has exited or closed its input, and are not the client's to handle.
func (s *Service) report(sess *session, err error) {
	if err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, ErrNotRunning) {
		s.logf("session %s: %v", sess.id, err)
	}
}
