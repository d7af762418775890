package daemon

import (
	"errors"
	"sync"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/pty"
)

// viewerQueue is how many Output messages a viewer may be behind before a
// lossy one is cut off.
const viewerQueue = 64

// errViewerBehind ends a watching client that could not keep up with the
// session's output; attaching again replays the scrollback.
var errViewerBehind = errors.New("client fell behind the session's output; attach again to catch up")

// viewer is one client watching a session's output.
type viewer struct {
	ch chan *sandboxdv1.Output
	// lossless viewers hold the output back rather than miss any of it:
	// the client that started a session and waits for its result.
	// Others are cut off when behind, so no watcher can stall the sandbox.
	lossless bool
	gone     chan struct{} // closed when the client has left
	behind   bool          // set before ch is closed, when cut off
}

// broadcast fans a session's output out to its viewers and keeps the
// scrollback for those who attach later. A viewer's channel is closed by
// the broadcast alone: when it falls behind or when the session ends.
type broadcast struct {
	// pub serializes publishers, so every viewer sees chunks in the order
	// the scrollback has them.
	pub sync.Mutex

	mu sync.Mutex
	sb *pty.Scrollback
	// viewers is made by the first join: most detached sessions never
	// have one, and it would be an allocation of their life.
	viewers map[*viewer]struct{}
	exit    *sandboxdv1.Exit
	ended   bool
}

func newBroadcast(scrollback int) *broadcast {
	return &broadcast{sb: pty.NewScrollback(scrollback)}
}

// publish records one chunk of output and hands it to every viewer. o's
// data is shared with the scrollback and the viewers, so nobody changes it
// afterwards.
func (b *broadcast) publish(o *sandboxdv1.Output) {
	b.pub.Lock()
	defer b.pub.Unlock()
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		return
	}
	b.sb.AppendOwned(int32(o.GetStream()), o.GetData())
	vs := make([]*viewer, 0, len(b.viewers))
	for v := range b.viewers {
		vs = append(vs, v)
	}
	b.mu.Unlock()
	for _, v := range vs {
		if v.lossless {
			select {
			case v.ch <- o:
			case <-v.gone:
			}
			continue
		}
		select {
		case v.ch <- o:
		default:
			b.mu.Lock()
			_, still := b.viewers[v]
			delete(b.viewers, v)
			b.mu.Unlock()
			if still {
				v.behind = true
				close(v.ch)
			}
		}
	}
}

// join adds a viewer and returns what it missed: the scrollback, and the
// Exit when the session has already ended (then there is no viewer).
func (b *broadcast) join(lossless bool) (*viewer, []pty.Chunk, *sandboxdv1.Exit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	replay := b.sb.Chunks()
	if b.ended {
		return nil, replay, b.exit
	}
	v := &viewer{ch: make(chan *sandboxdv1.Output, viewerQueue), lossless: lossless, gone: make(chan struct{})}
	if b.viewers == nil {
		b.viewers = map[*viewer]struct{}{}
	}
	b.viewers[v] = struct{}{}
	return v, replay, nil
}

// leave removes a viewer whose client has gone, so publish stops waiting
// for it.
func (b *broadcast) leave(v *viewer) {
	close(v.gone)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.viewers, v)
}

// end records how the session ended and closes every viewer's channel;
// each then sends the Exit from result.
func (b *broadcast) end(exit *sandboxdv1.Exit) {
	b.pub.Lock()
	defer b.pub.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.ended, b.exit = true, exit
	for v := range b.viewers {
		close(v.ch)
	}
	// An ended session is kept for a while (--retain-ended) and never
	// has a viewer again.
	b.viewers = nil
}

// result is what a viewer whose channel was closed reports: the Exit, or
// errViewerBehind. The channel's close orders the writes before it.
func (b *broadcast) result(v *viewer) (*sandboxdv1.Exit, error) {
	if v.behind {
		return nil, errViewerBehind
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exit, nil
}

func (b *broadcast) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.viewers)
}
