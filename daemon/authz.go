package daemon

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
)

// view is what one caller may see and control.
type view struct {
	// all: root, the daemon's own user, operators and Windows callers with
	// Admin see every session.
	all bool
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
		return view{all: true}
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
