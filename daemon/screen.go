package daemon

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/vterm"
)

// startScreen gives a terminal session its virtual screen: Inspect shows
// it, and while no interactive client is attached it answers the queries
// the program sends its terminal (a full-screen program that asks for the
// cursor position or the colours would otherwise wait for an answer no
// one gives and never draw). An interactive client's terminal answers for
// itself, so the screen's answers are dropped while one is attached.
func (s *Service) startScreen(sess *session, sio *stdio) {
	if !sio.tty {
		return
	}
	scr := vterm.NewScreen(int(sio.child.Rows), int(sio.child.Cols), func(answer []byte) {
		if sess.inputClaimed() {
			return
		}
		// Never blocks: a program that does not read its input while it
		// floods queries loses answers rather than stalls its screen.
		if err := writeNoWait(sio.stdin, answer); err == nil {
			sess.active()
		}
	})
	sio.screen = scr
	sess.screen.Store(scr)
}

// screenSnapshot is what the session's terminal shows, nil for a session
// without one.
func (s *session) screenSnapshot() *sandboxdv1.Screen {
	scr := s.screen.Load()
	if scr == nil {
		return nil
	}
	sn := scr.Snapshot()
	return &sandboxdv1.Screen{
		Rows: uint32(sn.Rows), Cols: uint32(sn.Cols), Lines: sn.Lines,
		CursorRow: uint32(sn.CursorRow), CursorCol: uint32(sn.CursorCol),
		CursorVisible: sn.CursorVisible, AltScreen: sn.AltScreen, Title: sn.Title,
	}
}

// inputClaimed says whether an interactive client holds the input.
func (s *session) inputClaimed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interactive
}
