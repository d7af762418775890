package daemon

import (
	"fmt"
	"sync"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// outputCap enforces limits.output_bytes: the first limit bytes of a
// session's output (its streams together) are kept, then one marker says
// the rest was dropped. The command is not stopped and its output is still
// read, so that it never blocks on a full pipe.
type outputCap struct {
	limit uint64
	tty   bool

	mu      sync.Mutex
	written uint64
	dropped uint64
	marked  bool
}

// truncationMarker says where output stopped being kept. On a terminal the
// line ends are a terminal's.
func truncationMarker(limit uint64, tty bool) []byte {
	nl := "\n"
	if tty {
		nl = "\r\n"
	}
	return fmt.Appendf(nil, "%s[sandboxd: output truncated: limits.output_bytes of %d bytes reached]%s", nl, limit, nl)
}

// admit returns what of o to publish, nil for nothing, and the marker to
// publish after it the one time the limit is crossed. A zero limit admits
// everything.
func (c *outputCap) admit(o *sandboxdv1.Output) (keep, marker *sandboxdv1.Output) {
	if c == nil || c.limit == 0 {
		return o, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	data := o.GetData()
	room := c.limit - c.written
	if uint64(len(data)) <= room {
		c.written += uint64(len(data))
		return o, nil
	}
	c.written = c.limit
	c.dropped += uint64(len(data)) - room
	if room > 0 {
		keep = &sandboxdv1.Output{Stream: o.GetStream(), Data: data[:room]}
	}
	if !c.marked {
		c.marked = true
		marker = &sandboxdv1.Output{Stream: o.GetStream(), Data: truncationMarker(c.limit, c.tty)}
	}
	return keep, marker
}

// remaining is how much output may still be kept, and whether there is a
// limit at all.
func (c *outputCap) remaining() (n uint64, limited bool) {
	if c == nil || c.limit == 0 {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit - c.written, true
}
