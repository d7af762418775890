package daemon

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/fdwait"
	"github.com/sandboxd/sandboxd/internal/vterm"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/pty"
)

// The size of a terminal session started without one.
const (
	defaultRows = 24
	defaultCols = 80
)

// eot is what a terminal sends for ^D: end of input at the start of a line.
const eot = 0x04

// stdio is the daemon's side of a session's standard streams: either three
// pipes or one pseudo-terminal.
type stdio struct {
	tty   bool
	child launcher.Stdio // handed to the backend, closed here after Start
	// stdin is the pipe's write end, or the PTY master. A pipe session's
	// ends stay out of the runtime's poller until they are first read or
	// written (fdwait.Lazy): an idle session's never are.
	stdin *fdwait.Lazy
	// stdinGrown: the stdin pipe, a page long while the session gets no
	// input (stdioPipe), has the usual length since its first write.
	stdinGrown sync.Once
	outputs    []output
	closers    []*fdwait.Lazy // every daemon-side file

	// grace bounds how long output readers wait for more data once the
	// sandbox has been reaped: the only writers left then are processes
	// the backend failed to end, and the session must still finish.
	grace    time.Duration
	draining atomic.Bool
	pumps    []*pump
	pumping  sync.WaitGroup

	// screen follows a terminal's output, nil for pipes.
	screen *vterm.Screen
}

type output struct {
	stream sandboxdv1.Output_Stream
	file   *fdwait.Lazy
}

func openStdio(tty bool, win *sandboxdv1.WindowSize, grace time.Duration) (*stdio, error) {
	var s *stdio
	var err error
	if tty {
		s, err = openPTY(win)
	} else {
		s, err = openPipes()
	}
	if err != nil {
		return nil, err
	}
	s.grace = grace
	return s, nil
}

// openPTY prepares a terminal session: the backend allocates the terminal
// (inside the sandbox) and the daemon adopts its master after Start.
func openPTY(win *sandboxdv1.WindowSize) (*stdio, error) {
	if err := checkWindow(win); err != nil {
		return nil, err
	}
	rows, cols := uint16(win.GetRows()), uint16(win.GetCols())
	if rows == 0 || cols == 0 {
		// A client without a terminal of its own (a supervisor, a script)
		// gives no size. Full-screen programs draw nothing on a 0x0
		// terminal, so the session gets the size terminals start at.
		rows, cols = defaultRows, defaultCols
	}
	return &stdio{
		tty:   true,
		child: launcher.Stdio{Terminal: true, Rows: rows, Cols: cols},
	}, nil
}

// adoptTerminal takes over the master of the terminal the backend made.
func (s *stdio) adoptTerminal(master *os.File) error {
	if master == nil {
		return errors.New("backend started a terminal session without a terminal")
	}
	m := fdwait.Opened(master)
	s.stdin = m
	s.outputs = []output{{sandboxdv1.Output_STDOUT, m}}
	s.closers = []*fdwait.Lazy{m}
	return nil
}

func openPipes() (_ *stdio, err error) {
	var ours [3]*fdwait.Lazy
	var theirs [3]*os.File
	defer func() {
		if err != nil {
			for i := range ours {
				if ours[i] != nil {
					ours[i].Close()
					theirs[i].Close()
				}
			}
		}
	}()
	for i := range ours {
		if ours[i], theirs[i], err = stdioPipe(i == 0); err != nil {
			return nil, fmt.Errorf("stdio pipe: %w", err)
		}
	}
	return &stdio{
		child:   launcher.Stdio{Stdin: theirs[0], Stdout: theirs[1], Stderr: theirs[2]},
		stdin:   ours[0],
		outputs: []output{{sandboxdv1.Output_STDOUT, ours[1]}, {sandboxdv1.Output_STDERR, ours[2]}},
		closers: ours[:],
	}, nil
}

// closeChild closes the daemon's copies of the sandbox's ends. Until then a
// pipe never reports EOF and a PTY master never reports the hang-up, because
// the daemon itself would still be a writer.
func (s *stdio) closeChild() {
	if s.tty {
		return
	}
	s.child.Stdin.Close()
	s.child.Stdout.Close()
	s.child.Stderr.Close()
	// An idle session keeps its stdio for as long as it lasts; the closed
	// files are garbage.
	s.child.Stdin, s.child.Stdout, s.child.Stderr = nil, nil, nil
}

func (s *stdio) closeAll() {
	for _, f := range s.closers {
		f.Close()
	}
}

func (s *stdio) write(p []byte) error {
	if !s.tty {
		// A session that gets input at all gets room for it: with a page,
		// input the command has not read yet would hold back the signals
		// and resizes that come after it on the same stream.
		s.stdinGrown.Do(func() {
			if rc, err := s.stdin.SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) { resizePipe(fd, true) })
			}
		})
	}
	f, err := s.stdin.File()
	if err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	if _, err := f.Write(p); err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	return nil
}

// closeStdin ends the command's input: a pipe is closed, a terminal gets ^D
// since closing the master would hang up the whole session.
func (s *stdio) closeStdin() error {
	if s.tty {
		return s.write([]byte{eot})
	}
	if err := s.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close stdin: %w", err)
	}
	return nil
}

func (s *stdio) resize(win *sandboxdv1.WindowSize) error {
	if !s.tty {
		return nil
	}
	if s.screen != nil && win.GetRows() > 0 && win.GetCols() > 0 {
		s.screen.Resize(int(win.GetRows()), int(win.GetCols()))
	}
	master, err := s.stdin.File()
	if err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	return resize(master, win)
}

// outputLinger is how long an output's reader waits for more once the
// output has gone quiet, before it gives its goroutine back and the
// output waits for the next write in the shared waiter (fdwait) without
// one: a program that writes steadily keeps its reader, an idle session
// keeps none.
const outputLinger = 250 * time.Millisecond

// pump publishes one output until the sandbox's side of it is closed.
// Reading never waits for a client that is gone, so the sandbox never
// blocks on a full pipe while it is being killed.
type pump struct {
	s       *stdio
	o       output
	publish func(*sandboxdv1.Output)
	// read reads the output; made by the first reader, which makes the
	// output's file.
	read func() ([]byte, error)
	// idle hands the output between its reader and the waiter.
	idle fdwait.Idle
	// long: the output pipe is of the usual length, not a page (resize).
	long bool
}

// startPumps starts publishing every output; waitPumps returns once each
// has ended. Each output waits in the waiter from the start, so that a
// session gets a reader only for an output that has something: a
// goroutine started with every launch, only to wait, cost more than the
// registration.
func (s *stdio) startPumps(publish func(*sandboxdv1.Output)) {
	for _, o := range s.outputs {
		p := &pump{s: s, o: o, publish: publish}
		p.idle.Init(o.file, outputLinger, p.lingering)
		p.idle.OnRest = p.shorten
		p.long = true
		s.pumps = append(s.pumps, p)
		s.pumping.Add(1)
		if !p.idle.Rest() {
			go p.run(false)
		}
	}
}

func (s *stdio) waitPumps() { s.pumping.Wait() }

func (p *pump) lingering() { p.run(true) }

// shorten makes the pipe a page long as the output rests (resize).
func (p *pump) shorten() { p.resize(false) }

// resize makes an output pipe a page long, or of the usual length once a
// read has filled a page (resizePipe): an idle session's pipes stay short,
// and so do those of a command that writes little, whose reads then cost
// no resizing; a terminal stays as it is. Only the output's one reader
// calls it, or startPumps before there is one.
func (p *pump) resize(long bool) {
	if p.s.tty || p.long == long {
		return
	}
	p.long = long
	if rc, err := p.o.file.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { resizePipe(fd, long) })
	}
}

// run reads and publishes until the output ends, or, with linger, until
// it has been quiet for outputLinger and the waiter takes it back.
func (p *pump) run(linger bool) {
	f := p.o.file
	if p.read == nil {
		file, err := f.File()
		if err != nil {
			// Closed: the session is over before its output was read.
			p.idle.Done()
			p.s.pumping.Done()
			return
		}
		p.read = outputReader(file)
	}
	linger = linger && p.idle.Linger()
	for {
		bounded := p.s.draining.Load()
		if bounded {
			p.s.bound(f)
		}
		data, err := p.read()
		if len(data) >= pipePage {
			p.resize(true)
		}
		if len(data) > 0 {
			// The scrollback and every viewer share data.
			p.publish(&sandboxdv1.Output{Stream: p.o.stream, Data: data})
			if linger {
				p.idle.Active()
			}
		}
		if err == nil {
			continue
		}
		if linger && !bounded && errors.Is(err, os.ErrDeadlineExceeded) {
			var rest bool
			if rest, linger = p.idle.Quiet(); rest {
				return
			}
			continue
		}
		// EOF for a pipe, EIO for a PTY master whose replica is gone,
		// a deadline or a close when draining is cut short.
		p.idle.Done()
		p.s.pumping.Done()
		return
	}
}

// drain tells the output readers that the sandbox is gone: from now on
// each read may wait at most grace for data. The bound is per read, not for
// the whole drain, so a slow client still gets every byte that was written.
// An output the waiter holds gets a reader again, which reads it to its end.
func (s *stdio) drain() {
	s.draining.Store(true)
	for _, p := range s.pumps {
		if p.idle.Stop() {
			go p.run(false)
			continue
		}
		s.bound(p.o.file)
	}
}

func (s *stdio) bound(f *fdwait.Lazy) {
	// Files that cannot take a deadline (a blocking PTY master outside
	// Linux) are left to end on their own.
	_ = f.SetReadDeadline(time.Now().Add(s.grace))
}

// plainOutputReader reads f with one Read per call into a buffer of its
// own, and returns a copy of what came.
func plainOutputReader(f *os.File) func() ([]byte, error) {
	buf := make([]byte, outputChunk)
	return func() ([]byte, error) {
		n, err := f.Read(buf)
		if n == 0 {
			return nil, err
		}
		return append([]byte(nil), buf[:n]...), err
	}
}

func resize(master *os.File, win *sandboxdv1.WindowSize) error {
	if err := checkWindow(win); err != nil {
		return err
	}
	return pty.Resize(master, uint16(win.GetRows()), uint16(win.GetCols()))
}

func checkWindow(win *sandboxdv1.WindowSize) error {
	if win.GetRows() > math.MaxUint16 || win.GetCols() > math.MaxUint16 {
		return &RequestError{Field: "window", Msg: fmt.Sprintf("%dx%d is larger than a terminal can be", win.GetRows(), win.GetCols())}
	}
	return nil
}
