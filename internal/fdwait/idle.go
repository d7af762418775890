package fdwait

import (
	"sync"
	"syscall"
	"time"
)

// File is what an Idle hands on: an *os.File, or a Lazy, whose file is
// made only once a reader first runs.
type File interface {
	syscall.Conn
	SetReadDeadline(t time.Time) error
}

// Idle hands a file between the goroutine that reads it and the waiter.
// The reader reads with a deadline of linger: once the file has been
// quiet that long, the reader returns and the file waits in the waiter,
// which starts the reader again when the file is readable.
//
// The owner starts with Rest, or with a reader of its own; its reader
// calls Linger as it starts, Active when a read brought something, and
// Quiet when a read timed out; Stop ends the resting for good, and Done,
// once the reader has finished with the file, removes it from the
// waiter. A file never rested is never in the waiter's set.
type Idle struct {
	f      File
	linger time.Duration
	run    func()
	// OnRest, when set, runs each time f is about to rest, before the
	// waiter may start a reader again: the owner's last word as the
	// reader that was.
	OnRest func()
	// last is when the reader last had data: the deadline is moved on
	// from it, so that only linger of quiet hands the file back. Only the
	// reader uses it.
	last time.Time

	mu   sync.Mutex
	wait *Wait
	// idle: no goroutine reads f, the waiter holds it.
	idle    bool
	stopped bool
}

// Init makes i the hand-off of f, whose reader, run, the waiter starts on
// a goroutine of its own when f is readable after it rested. run calls
// Linger first. An Idle is part of its owner's record, so as not to be an
// allocation of its own with every launch; it is not copied once in use.
func (i *Idle) Init(f File, linger time.Duration, run func()) {
	i.f, i.linger, i.run = f, linger, run
}

// Rest hands f to the waiter before any reader has run: the reader first
// starts when f is readable. false when the waiter cannot take f; the
// owner then starts a reader that reads to the end.
func (i *Idle) Rest() bool { return i.rest() }

// Linger begins a reader's turn: reads of f time out after linger of
// quiet. false when f takes no deadline; the reader then reads to the
// end and never rests.
func (i *Idle) Linger() bool {
	i.last = time.Now()
	return i.f.SetReadDeadline(i.last.Add(i.linger)) == nil
}

// Active notes that a read brought data.
func (i *Idle) Active() { i.last = time.Now() }

// Quiet handles a read that timed out while lingering. rest: the waiter
// holds f now and the reader returns. Otherwise the reader reads on, with
// linger still when data came since the deadline was set, which is moved
// on, and without once the file could not rest: Stop was called, whose
// caller decides what ends the reads, or the waiter cannot take f.
func (i *Idle) Quiet() (rest, linger bool) {
	if next := i.last.Add(i.linger); time.Now().Before(next) && i.f.SetReadDeadline(next) == nil {
		return false, true
	}
	return i.rest(), false
}

func (i *Idle) rest() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return false
	}
	if i.OnRest != nil {
		i.OnRest()
	}
	var err error
	if i.wait == nil {
		// The first rest registers f; it may start woken at once, which
		// waits for mu and finds f idle.
		i.wait, err = Add(i.f, i.woken)
	} else {
		err = i.wait.Rearm()
	}
	if err != nil {
		i.f.SetReadDeadline(time.Time{})
		return false
	}
	i.idle = true
	return true
}

// woken is the waiter's: f is readable.
func (i *Idle) woken() {
	i.mu.Lock()
	if !i.idle {
		// Stop took it over.
		i.mu.Unlock()
		return
	}
	i.idle = false
	i.mu.Unlock()
	i.run()
}

// Stop ends the resting: from now on a reader reads on. true when f was
// resting: no goroutine reads it, and the reader's part is the caller's.
func (i *Idle) Stop() (wasIdle bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.stopped = true
	wasIdle = i.idle
	i.idle = false
	return wasIdle
}

// Done removes f from the waiter, if it ever rested there: the reader
// has finished with it. Closing f first is safe (see Add).
func (i *Idle) Done() {
	i.mu.Lock()
	w := i.wait
	i.mu.Unlock()
	if w != nil {
		w.Cancel()
	}
}
