package daemon

import (
	"errors"
	"sync"
	"sync/atomic"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/pty"
)

// viewerQueue is how many Output messages a viewer may be behind before a
// lossy one is cut off.
const viewerQueue = 64

// viewerQueueBytes is how much output a viewer may be behind, whatever the
// messages' number: a lossy one is cut off beyond it, a lossless one holds
// the output back. With reads of up to 128 KiB, viewerQueue alone let a
// slow client keep 8 MiB of a flooding session's output in the daemon;
// this is what it kept with 32 KiB reads.
const viewerQueueBytes = 2 << 20

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
	// queued is the output in ch, in bytes; room (a lossless viewer's)
	// wakes a publish waiting for it to fall (took).
	queued atomic.Int64
	room   chan struct{}
}

// took is the viewer's reader's, for each message it takes from ch.
func (v *viewer) took(o *sandboxdv1.Output) {
	v.queued.Add(-int64(len(o.GetData())))
	select {
	case v.room <- struct{}{}:
	default:
	}
}

// fits says whether n more bytes may be queued for v. A message is always
// let in when nothing is queued, however large.
func (v *viewer) fits(n int) bool {
	q := v.queued.Load()
	return q == 0 || q+int64(n) <= viewerQueueBytes
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
	n := len(o.GetData())
	for _, v := range vs {
		if v.lossless {
			b.hold(v, o)
			continue
		}
		if !v.fits(n) {
			b.cut(v)
			continue
		}
		v.queued.Add(int64(n))
		select {
		case v.ch <- o:
		default:
			b.cut(v)
		}
	}
}

// hold hands o to a lossless viewer, waiting for room in its queue, or
// until it has left.
func (b *broadcast) hold(v *viewer, o *sandboxdv1.Output) {
	n := len(o.GetData())
	for !v.fits(n) {
		select {
		case <-v.room:
		case <-v.gone:
			return
		}
	}
	v.queued.Add(int64(n))
	select {
	case v.ch <- o:
	case <-v.gone:
	}
}

// cut ends a lossy viewer that fell behind.
func (b *broadcast) cut(v *viewer) {
	b.mu.Lock()
	_, still := b.viewers[v]
	delete(b.viewers, v)
	b.mu.Unlock()
	if still {
		v.behind = true
		close(v.ch)
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
	if lossless {
		// A lossy viewer never waits for room; took's send to a nil
		// channel is never ready.
		v.room = make(chan struct{}, 1)
	}
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
