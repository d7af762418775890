package daemon

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// attach joins caller to an existing session: Started, the scrollback,
// then live output and the Exit. An interactive client (one at a time)
// also sends input, resizes and signals.
func (s *Service) attach(caller Caller, stream SessionStream, att *sandboxdv1.Attach) error {
	sess, err := s.lookupFor(caller, att.GetId())
	if err != nil {
		return err
	}
	if sess.id == caller.Session {
		// Its own output would be fed back into itself without end.
		return &RequestError{Field: "attach.id", Msg: "a session cannot attach to itself"}
	}
	if err := checkWindow(att.GetWindow()); err != nil {
		return err
	}
	interactive := !att.GetReadOnly() && !att.GetReplayOnly()
	if interactive {
		if err := s.mayControl(caller, sess, "an interactive attach"); err != nil {
			return err
		}
		if err := sess.claimInput(); err != nil {
			return err
		}
		if win := att.GetWindow(); sess.tty && win.GetRows() > 0 && win.GetCols() > 0 {
			s.withInput(sess, func(in *stdio) error { return in.resize(win) })
		}
	}
	v, replay, exit := sess.out.join(false)
	// failed is how the stream ends when a send fails: the client is gone.
	failed := func(err error) error {
		if v != nil {
			sess.out.leave(v)
		}
		if interactive {
			sess.releaseInput()
		}
		return err
	}
	started := &sandboxdv1.Started{SessionId: sess.id, PolicyDigest: sess.digest}
	if !att.GetOmitEnforcement() {
		started.Enforcement = sess.enforcementReport()
	}
	if err := stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: started}}); err != nil {
		return failed(err)
	}
	limit := outputDataLimit(stream.Context())
	for _, c := range replay {
		o := &sandboxdv1.Output{Stream: sandboxdv1.Output_Stream(c.Stream), Data: c.Data}
		if err := sendOutput(stream, o, limit); err != nil {
			return failed(err)
		}
	}
	if v == nil {
		if interactive {
			sess.releaseInput()
		}
		return stream.Send(&sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: exit}})
	}
	if att.GetReplayOnly() {
		// The session runs on; the stream ends with what was kept.
		sess.out.leave(v)
		return nil
	}
	return s.relay(stream, sess, v, interactive, false)
}
