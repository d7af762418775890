package daemon

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Watch sends the caller the events of the sessions it may see, filtered
// by req, until ctx ends or send fails. It starts with a snapshot of every
// matching live session (its state and the denials it keeps for Inspect),
// then follows live events, none of which the snapshot already reflects.
func (s *Service) Watch(ctx context.Context, caller Caller, req *sandboxdv1.WatchRequest, send func(*sandboxdv1.Event) error) error {
	if id := req.GetSessionId(); id != "" {
		if _, err := s.lookupFor(caller, id); err != nil {
			return err
		}
	}
	// Subscribed before the snapshot is taken: an event that happens in
	// between is both in the queue and reflected by the snapshot, and is
	// skipped below by its sequence number, rather than lost.
	w := s.events.subscribe()
	defer s.events.unsubscribe(w)
	v := s.viewOf(caller)

	s.mu.Lock()
	var live []*session
	for _, sess := range s.sessions {
		if !sess.closed && s.visibleLocked(v, sess) && (req.GetSessionId() == "" || s.descendsLocked(sess, req.GetSessionId())) {
			live = append(live, sess)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(live, func(a, b *session) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.id, b.id))
	})
	reflected := make(map[string]uint64, len(live))
	// members is the watched subtree; sessions started later join it by
	// their parent.
	members := map[string]bool{}
	if id := req.GetSessionId(); id != "" {
		members[id] = true
	}
	for _, sess := range live {
		evs, seq := sess.snapshot()
		reflected[sess.id] = seq
		members[sess.id] = true
		for _, ev := range evs {
			if (req.GetNoStates() && ev.GetState() != nil) || (req.GetNoDenials() && ev.GetDenial() != nil) {
				continue
			}
			if err := send(ev); err != nil {
				return err
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.behind:
			return fmt.Errorf("watch: %w", ErrWatcherBehind)
		case ev := <-w.ch:
			if seq, ok := reflected[ev.GetSessionId()]; ok && ev.GetSeq() <= seq {
				continue
			}
			if req.GetSessionId() != "" {
				if !members[ev.GetSessionId()] {
					if !members[ev.GetParentId()] {
						continue
					}
					members[ev.GetSessionId()] = true
				}
			}
			if (req.GetNoStates() && ev.GetState() != nil) || (req.GetNoDenials() && ev.GetDenial() != nil) {
				continue
			}
			if !s.visible(v, ev.GetSessionId()) {
				continue
			}
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}

// visible says whether the session id is in v.
func (s *Service) visible(v view, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	return ok && s.visibleLocked(v, sess)
}
