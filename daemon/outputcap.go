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

// truncationMarker says where output stopped being kept, and by which
// limit: c's own, or by's, an ancestor's. On a terminal the line ends are
// a terminal's.
func (c *outputCap) truncationMarker(by *outputCap) []byte {
	nl := "\n"
	if c.tty {
		nl = "\r\n"
	}
	if by == c {
		return fmt.Appendf(nil, "%s[sandboxd: output truncated: limits.output_bytes of %d bytes reached]%s", nl, by.limit, nl)
	}
	return fmt.Appendf(nil, "%s[sandboxd: output truncated: an ancestor session's limits.output_bytes of %d bytes reached]%s", nl, by.limit, nl)
}

// droppedDetail is the detail of the denial that records the truncation
// by by, c's cap or an ancestor's.
func (c *outputCap) droppedDetail(by *outputCap) string {
	if by == c {
		return fmt.Sprintf("output beyond %d bytes is dropped; the command runs on", by.limit)
	}
	return fmt.Sprintf("output is dropped: an ancestor session has kept its limits.output_bytes of %d bytes, which its descendants' output counts against; the command runs on", by.limit)
}

// admit returns what of o to publish, nil for nothing, and the marker to
// publish after it the one time the limit is crossed, with the cap whose
// limit was crossed: c's or an ancestor's. A zero limit admits
// everything. What is kept counts against every ancestor's limit too, and
// no more is kept than the one with the least left has.
func (c *outputCap) admit(o *sandboxdv1.Output) (keep, marker *sandboxdv1.Output, by *outputCap) {
	if c == nil || c.limit == 0 {
		return o, nil, nil
	}
	line := c.lock()
	defer unlock(line)
	data := o.GetData()
	room, by := roomLocked(line)
	if uint64(len(data)) <= room {
		for _, a := range line {
			a.written += uint64(len(data))
		}
		return o, nil, nil
	}
	for _, a := range line[1:] {
		a.written += room
	}
	c.written = c.limit
	c.dropped += uint64(len(data)) - room
	if room > 0 {
		// A copy: the scrollback keeps what is kept for the session's
		// life, and the read it was cut from is up to 128 KiB.
		keep = &sandboxdv1.Output{Stream: o.GetStream(), Data: append([]byte(nil), data[:room]...)}
	}
	if !c.marked {
		c.marked = true
		return keep, &sandboxdv1.Output{Stream: o.GetStream(), Data: c.truncationMarker(by)}, by
	}
	return keep, nil, nil
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

// roomLocked is the least any cap of line has left, and the cap that has
// it (the nearest of those with as little); they are locked.
func roomLocked(line []*outputCap) (uint64, *outputCap) {
	room, by := line[0].limit-line[0].written, line[0]
	for _, a := range line[1:] {
		if left := a.limit - a.written; left < room {
			room, by = left, a
		}
	}
	return room, by
}

// remaining is how much output may still be kept, its ancestors' counted,
// and the cap that has that little left (c's or an ancestor's), nil when
// there is no limit at all.
func (c *outputCap) remaining() (n uint64, by *outputCap) {
	if c == nil || c.limit == 0 {
		return 0, nil
	}
	line := c.lock()
	defer unlock(line)
	return roomLocked(line)
}
