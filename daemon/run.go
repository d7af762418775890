package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// SessionStream is one session's bidirectional stream as the Service sees
// it; grpc.BidiStreamingServer[SessionRequest, SessionResponse] is one.
type SessionStream interface {
	Context() context.Context
	Send(*sandboxdv1.SessionResponse) error
	Recv() (*sandboxdv1.SessionRequest, error)
}

// drainGrace is how long a read of output may wait once the sandbox has
// been reaped (see stdio.drain).
const drainGrace = 2 * time.Second

// readChunk is the largest Output message the daemon sends.
const readChunk = 32 << 10

// Session runs one session for caller over stream: it reads the Start,
// starts the sandbox, then relays stdin, resizes and signals in and
// Started, Output and Exit out. It returns when the session has ended and
// its Exit has been sent, or with an error when there is no Exit to send.
func (s *Service) Session(caller Caller, stream SessionStream) error {
	first, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("receive start: %w", err)
	}
	start := first.GetStart()
	if start == nil {
		return &RequestError{Field: "start", Msg: "the first message of a session must be Start"}
	}
	sess, spec, err := s.prepare(caller, start)
	if err != nil {
		return err
	}
	if err := s.add(sess); err != nil {
		return err
	}
	defer s.done(sess)
	return s.run(stream, sess, spec, start.GetWindow())
}

// prepare checks a Start and turns it into the session record and the spec
// for the backend. Validation happens here, once; the policy the backend
// gets, the one Inspect shows and the digest the sandbox sees are all the
// same normalized value.
func (s *Service) prepare(caller Caller, start *sandboxdv1.Start) (*session, launcher.Spec, error) {
	if err := policy.Validate(start.GetPolicy()); err != nil {
		return nil, launcher.Spec{}, fmt.Errorf("invalid policy: %w", err)
	}
	pol := policy.Normalize(start.GetPolicy())
	digest := policy.Digest(pol)
	cmd := start.GetCommand()
	if err := checkCommand(cmd.GetArgv(), cmd.GetCwd()); err != nil {
		return nil, launcher.Spec{}, err
	}
	if err := checkWindow(start.GetWindow()); err != nil {
		return nil, launcher.Spec{}, err
	}
	cwd := cmd.GetCwd()
	if cwd == "" {
		cwd = "/"
	}
	id, err := newSessionID()
	if err != nil {
		return nil, launcher.Spec{}, err
	}
	uid, gid := s.sandboxIdentity(caller)
	env, err := buildEnv(start.GetTty(), homeDir(s.cfg.PasswdFile, uid), cmd.GetEnv(), id, digest)
	if err != nil {
		return nil, launcher.Spec{}, err
	}
	sess := &session{
		id:       id,
		ownerUID: caller.UID,
		argv:     cmd.GetArgv(),
		cwd:      cwd,
		tty:      start.GetTty(),
		policy:   pol,
		digest:   digest,
		created:  time.Now(),
		state:    sandboxdv1.State_STARTING,
	}
	spec := launcher.Spec{
		SessionID:   id,
		Policy:      pol,
		Digest:      digest,
		Argv:        sess.argv,
		Env:         env,
		Cwd:         cwd,
		UID:         uid,
		GID:         gid,
		HideSockets: s.hiddenSockets(),
	}
	return sess, spec, nil
}

func (s *Service) run(stream SessionStream, sess *session, spec launcher.Spec, win *sandboxdv1.WindowSize) error {
	ctx := stream.Context()
	sio, err := openStdio(sess.tty, win, drainGrace)
	if err != nil {
		_, ferr := sess.startFailure(err)
		return ferr
	}
	spec.Stdio = sio.child
	proc, err := s.cfg.Backend.Start(ctx, spec)
	sio.closeChild()
	if err != nil {
		sio.closeAll()
		s.logf("session %s: start %q: %v", sess.id, sess.argv[0], err)
		exit, err := sess.startFailure(err)
		if err != nil {
			return err
		}
		// Not a Started: the sandbox never ran a command, and the client
		// exits with the shell's 126/127 from this Exit.
		return stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: exit}})
	}
	if sess.tty {
		if err := sio.adoptTerminal(proc.Terminal()); err != nil {
			proc.Kill()
			proc.Wait()
			_, ferr := sess.startFailure(err)
			return ferr
		}
	}
	defer sio.closeAll()
	// Started and Inspect both show this one report.
	enforcement := proc.Enforcement()
	if err := sess.running(proc, enforcement); err != nil {
		// Only this goroutine moves a STARTING session, so this means a bug;
		// even then no sandbox is left behind.
		proc.Kill()
		proc.Wait()
		return err
	}
	s.logf("session %s: started pid %d for uid %d: %q", sess.id, proc.Pid(), sess.ownerUID, sess.argv)
	if s.isClosing() {
		s.end(sess, reasonShutdown)
	}

	var sendMu sync.Mutex
	send := func(r *sandboxdv1.SessionResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(r)
	}
	// A failed send means the client is gone; the context watcher below
	// ends the sandbox, so the error needs no handling here.
	send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{
		SessionId:    sess.id,
		PolicyDigest: sess.digest,
		Enforcement:  enforcement,
	}}})

	if d := sess.policy.GetLimits().GetTimeout().AsDuration(); d > 0 {
		t := time.AfterFunc(d, func() { s.end(sess, reasonTimeout) })
		defer t.Stop()
	}
	var pumps sync.WaitGroup
	for _, o := range sio.outputs {
		pumps.Go(func() { sio.pump(o, send) })
	}
	go s.forwardInput(stream, sess, sio)
	reaped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// Sessions are not detachable yet: a sandbox whose client is
			// gone would run unobserved and unkillable by that client.
			s.end(sess, reasonDisconnected)
		case <-reaped:
		}
	}()

	st, waitErr := proc.Wait()
	sess.markWaited()
	close(reaped)
	sio.drain()
	pumps.Wait()
	exit, err := sess.finish(st, waitErr)
	if err != nil {
		return err
	}
	s.logf("session %s: %s code %d signal %d %s", sess.id, exit.GetState(), exit.GetExitCode(), exit.GetSignal(), exit.GetReason())
	return send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: exit}})
}

// forwardInput relays the client's messages after Start until the stream
// ends. It returns when Recv fails, at the latest when the session handler
// has returned and gRPC cancels the stream.
func (s *Service) forwardInput(stream SessionStream, sess *session, sio *stdio) {
	for {
		req, err := stream.Recv()
		if err != nil {
			// A half-close is the client saying it has no more input. A
			// pipe reader should see EOF then rather than wait forever; a
			// terminal stays open, since ^D means more than EOF to
			// programs reading it raw.
			if errors.Is(err, io.EOF) && !sess.tty {
				s.report(sess, sio.closeStdin())
			}
			return
		}
		switch m := req.GetMsg().(type) {
		case *sandboxdv1.SessionRequest_Stdin:
			if len(m.Stdin.GetData()) > 0 {
				s.report(sess, sio.write(m.Stdin.GetData()))
			}
			if m.Stdin.GetEof() {
				s.report(sess, sio.closeStdin())
			}
		case *sandboxdv1.SessionRequest_Resize:
			s.report(sess, sio.resize(m.Resize))
		case *sandboxdv1.SessionRequest_Signal:
			sig := m.Signal.GetSignal()
			if sig <= 0 || sig > maxSignal {
				s.logf("session %s: ignoring signal %d", sess.id, sig)
				continue
			}
			s.report(sess, sess.signal(syscall.Signal(sig)))
		case *sandboxdv1.SessionRequest_Start:
			s.logf("session %s: ignoring a second Start", sess.id)
		}
	}
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
