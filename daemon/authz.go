package daemon

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"

	"github.com/sandboxd/sandboxd/internal/signum"
)

// view is what one caller may see and control.
type view struct {
	// all: root, the daemon's own user, operators and Windows callers with
	// Admin see every session.
	all bool
	// operator: all came from the operators group alone. An operator
	// watches and kills every session, and controls only its own (uid):
	// no input, other signals or layer changes reach another's sandbox,
	// which may be root's and write where root may.
	operator bool
	// uid is the caller's uid on the main socket: it sees the sessions it
	// owns.
	uid uint32
	// sid is, instead of uid, a Windows caller's user SID on the main pipe:
	// it sees the sessions it owns.
	sid string
	// root is the session whose own socket the call came in on: the caller
	// sees that session and its descendants, whatever its peer
	// credentials say.
	root string
}

// viewOf decides a caller's view. On a session socket the socket alone
// counts: the connection may even have been made by the daemon itself on
// the sandbox's behalf, so its credentials mean nothing there.
func (s *Service) viewOf(c Caller) view {
	if c.Session != "" {
		return view{root: c.Session}
	}
	if c.SID != "" {
		// Windows: every caller's uid is 0 there, which must not pass for
		// root.
		if c.Admin {
			return view{all: true}
		}
		return view{sid: c.SID}
	}
	if c.UID == 0 || int64(c.UID) == int64(os.Geteuid()) {
		return view{all: true}
	}
	if s.operators != nil && (c.GID == *s.operators || slices.Contains(c.Groups, *s.operators)) {
		return view{all: true, operator: true, uid: c.UID}
	}
	return view{uid: c.UID}
}

// visibleLocked says whether v includes sess; s.mu is held.
func (s *Service) visibleLocked(v view, sess *session) bool {
	switch {
	case v.all:
		return true
	case v.root != "":
		return s.descendsLocked(sess, v.root)
	case v.sid != "":
		return sess.ownerSID == v.sid
	}
	return sess.ownerUID == v.uid
}

// controls says whether v may change sess, which it sees: type into it,
// resize or signal it, settle its layers.
func (v view) controls(sess *session) bool {
	return !v.operator || sess.ownerUID == v.uid
}

// operatorRefusal is the refusal of what an operator may not do to a
// session that is not its own.
func operatorRefusal(what, id string) error {
	return fmt.Errorf("%s of session %s, which is not yours: the operators group sees every session read-only (list, inspect, events, attach --read-only, logs, kill): %w", what, quoteID(id), ErrPermission)
}

// mayControl refuses an operator what for session sess that it does not
// own; every other caller that sees sess controls it.
func (s *Service) mayControl(c Caller, sess *session, what string) error {
	if !s.viewOf(c).controls(sess) {
		return operatorRefusal(what, sess.id)
	}
	return nil
}

// maySignal refuses an operator a signal other than one that ends it to a
// session not its own: an operator kills, and a signal a program handles
// (SIGUSR1, SIGHUP, SIGSTOP) would control it. Signal 0 is the kill of
// the whole sandbox.
func (s *Service) maySignal(c Caller, sess *session, sig int32) error {
	if sig == 0 || s.viewOf(c).controls(sess) {
		return nil
	}
	if host, ok := signum.ToHost(sig); ok && (host == syscall.SIGKILL || host == syscall.SIGTERM) {
		return nil
	}
	return operatorRefusal(fmt.Sprintf("signal %d", sig), sess.id)
}

// mayChangeLayers refuses an operator the layers of a session that are not
// its own, for what changes them or shows their content (a commit, a
// discard, a patch, a start on them); it may list them and see which paths
// they change. Anyone else is left to the layers' own check, which hides
// the layers it may not see.
func (s *Service) mayChangeLayers(c Caller, id, what string) error {
	v := s.viewOf(c)
	if !v.operator {
		return nil
	}
	// Layers that are not there are the layers' own check's to refuse
	// (layersOf, which every caller makes too); layers that cannot be
	// read are refused here as well, since whose they are is unknown.
	st, err := s.layers.get()
	if err != nil {
		return err
	}
	infos, err := st.Of(id)
	if err != nil {
		return fmt.Errorf("layers of session %s: %w", id, err)
	}
	if len(infos) == 0 || infos[0].Owner == v.uid {
		return nil
	}
	return operatorRefusal(what, id)
}

// descendsLocked says whether sess is root or below it; s.mu is held.
func (s *Service) descendsLocked(sess *session, root string) bool {
	for sess != nil {
		if sess.id == root {
			return true
		}
		sess = s.sessions[sess.parentID]
	}
	return false
}

// lookupFor returns session id if the caller's view includes it. Sessions
// outside it do not exist for the caller: NotFound, not PermissionDenied,
// so a sandbox cannot probe for other sessions' ids.
func (s *Service) lookupFor(c Caller, id string) (*session, error) {
	v := s.viewOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	sess, ok := s.sessions[id]
	if !ok || !s.visibleLocked(v, sess) {
		return nil, fmt.Errorf("session %s: %w", quoteID(id), ErrNotFound)
	}
	return sess, nil
}

// lookupGroup resolves a group by name, or takes a number as the gid
// itself: a gid needs no entry in /etc/group to be a process's group.
func lookupGroup(name string) (uint32, error) {
	if gid, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(gid), nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("group %q: %w", name, err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %q: gid %q: %w", name, g.Gid, err)
	}
	return uint32(gid), nil
}
