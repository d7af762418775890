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
	// parent is the parent session's cap, which what this one keeps is
	// drawn from too, nil for none.
	parent *outputCap

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
// everything. What is kept counts against every ancestor's limit too, and
// no more is kept than the one with the least left has.
func (c *outputCap) admit(o *sandboxdv1.Output) (keep, marker *sandboxdv1.Output) {
	if c == nil || c.limit == 0 {
		return o, nil
	}
	line := c.lock()
	defer unlock(line)
	data := o.GetData()
	room := roomLocked(line)
	if uint64(len(data)) <= room {
		for _, a := range line {
			a.written += uint64(len(data))
		}
		return o, nil
	}
	for _, a := range line[1:] {
		a.written += room
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

// lock locks c and its ancestors, in that order (every caller takes them
// from the descendant up, so no two wait for each other), and returns
// them.
func (c *outputCap) lock() []*outputCap {
	var line []*outputCap
	for a := c; a != nil; a = a.parent {
		a.mu.Lock()
		line = append(line, a)
	}
	return line
}

func unlock(line []*outputCap) {
	for _, a := range line {
		a.mu.Unlock()
	}
}

// roomLocked is the least any cap of line has left; they are locked.
func roomLocked(line []*outputCap) uint64 {
	room := line[0].limit - line[0].written
	for _, a := range line[1:] {
		room = min(room, a.limit-a.written)
	}
	return room
}

// remaining is how much output may still be kept, its ancestors' counted,
// and whether there is a limit at all.
func (c *outputCap) remaining() (n uint64, limited bool) {
	if c == nil || c.limit == 0 {
		return 0, false
	}
	line := c.lock()
	defer unlock(line)
	return roomLocked(line), true
}
