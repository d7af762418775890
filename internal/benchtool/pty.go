//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api/client"
)

// stopwatch is the consumer of both sides of the throughput figure: the
// bytes of either reach the same Write. It counts them and notes when the
// first and the last write came, so that a sample is the rate of the
// stream itself: starting the program (a sandbox launch on one side, a
// fork and exec on the other) and reaping it are outside it.
type stopwatch struct {
	mu          sync.Mutex
	n, first    int64
	begin, last time.Time
}

func (s *stopwatch) Write(p []byte) (int, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		s.begin, s.first = now, int64(len(p))
	}
	s.n += int64(len(p))
	s.last = now
	return len(p), nil
}

// rate is MB/s of what came after the first write, over the time from the
// first write to the last.
func (s *stopwatch) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.last.Sub(s.begin).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(s.n-s.first) / 1e6 / d
}

func (s *stopwatch) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (b *bench) ptyFigures() error {
	if err := b.ptyThroughput(); err != nil {
		return err
	}
	return b.keystrokes()
}

// settle is the pause after each throughput sample. A sandbox's teardown
// (its cgroup, its namespaces, which the kernel frees in workers of its
// own) goes on after its Exit; without the pause it would run during the
// next sample, whichever side that is.
const settle = 200 * time.Millisecond

// ptyThroughput moves the same bytes through a sandboxd terminal session
// and through a local pty read by benchtool itself, into the same kind of
// consumer, in alternating samples: one untimed round, then
// cfg.ptyRounds rounds of one sample per side, the side that goes first
// changing every round. The figure is the median of the rounds' ratios,
// each taken from two samples next to each other in time, so that other
// load on the machine (it changes by the second on a shared host) falls
// on both sides of each ratio alike; the spread of the ratios is noted.
func (b *bench) ptyThroughput() error {
	size := int64(b.cfg.ptyMiB) * mib
	argv := []string{"head", "-c", fmt.Sprintf("%dM", b.cfg.ptyMiB), "/dev/zero"}
	start, err := b.startMsg(true, false, argv...)
	if err != nil {
		return err
	}
	// The daemon reads its end of the terminal as fast as the client takes
	// the output, so this is the whole path: terminal, daemon, gRPC, client.
	sandboxd := func() (float64, error) {
		var got stopwatch
		res, err := b.cl.Run(b.ctx, client.RunOptions{Start: start, Stdout: &got, Stderr: &got})
		if err != nil {
			return 0, err
		}
		if code := client.ExitCode(res, nil); code != 0 {
			return 0, fmt.Errorf("pty session %s: %q exited %d: %s", res.SessionID, argv, code, res.Exit.GetReason())
		}
		if got.count() != size {
			return 0, fmt.Errorf("pty session: received %d bytes of %d", got.count(), size)
		}
		return got.rate(), nil
	}
	raw := func() (float64, error) {
		var got stopwatch
		if err := rawPTYRead(b.ctx, argv, &got); err != nil {
			return 0, err
		}
		if got.count() != size {
			return 0, fmt.Errorf("raw pty: read %d bytes of %d", got.count(), size)
		}
		return got.rate(), nil
	}
	// What each side cost in CPU is noted beside the rates: unlike them,
	// it hardly depends on what else the machine runs. The writer and the
	// kernel's workers that move the bytes through the terminal are alike
	// on both sides and left out.
	daemon, err := daemonPID(b.socket)
	if err != nil {
		return fmt.Errorf("the daemon's pid: %w", err)
	}
	var cpu [3]time.Duration // the daemon, its client, the raw side's reader
	var sdRates, rawRates, ratios []float64
	for round := range 1 + b.cfg.ptyRounds {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		var rates [2]float64
		for _, side := range order {
			if err := b.ctx.Err(); err != nil {
				return err
			}
			d0, s0, err := ptyCPU(daemon)
			if err != nil {
				return err
			}
			var r float64
			if side == 0 {
				r, err = sandboxd()
			} else {
				r, err = raw()
			}
			if err != nil {
				return err
			}
			d1, s1, err := ptyCPU(daemon)
			if err != nil {
				return err
			}
			rates[side] = r
			if round > 0 && side == 0 {
				cpu[0] += d1 - d0
				cpu[1] += s1 - s0
			} else if round > 0 {
				cpu[2] += s1 - s0
			}
			time.Sleep(settle)
		}
		if round == 0 || rates[1] == 0 {
			continue
		}
		sdRates, rawRates = append(sdRates, rates[0]), append(rawRates, rates[1])
		ratios = append(ratios, rates[0]/rates[1])
	}
	if len(ratios) == 0 {
		return errors.New("pty output: no sample moved enough bytes to time")
	}
	r := median(ratios)
	b.add(row{
		figure:      fmt.Sprintf("pty output, median of %d rounds of %d MiB", len(ratios), b.cfg.ptyMiB),
		value:       fmt.Sprintf("%.0f MB/s", median(sdRates)),
		counterpart: fmt.Sprintf("raw pty %.0f MB/s", median(rawRates)),
		ratio:       fmt.Sprintf("%.2fx", r),
		target:      ">= 0.90x raw",
		verdict:     verdict(r >= 0.9),
	})
	b.note("pty output: ratios of the %d rounds %s (range %.2f-%.2fx); sandboxd MB/s %s; raw pty MB/s %s",
		len(ratios), fmtFloats(ratios, "%.2f"), slices.Min(ratios), slices.Max(ratios), fmtFloats(sdRates, "%.0f"), fmtFloats(rawRates, "%.0f"))
	moved := float64(b.cfg.ptyRounds * b.cfg.ptyMiB)
	perMiB := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / moved }
	b.note("pty output: CPU per MiB over the timed rounds: the daemon %.2f ms and its client %.2f ms, against %.2f ms for the raw pty's reader (the writer and the kernel's workers apart, alike on both sides)",
		perMiB(cpu[0]), perMiB(cpu[1]), perMiB(cpu[2]))
	b.reproduce("pty output (sandboxd, then a local pty read by benchtool itself, alternating; both into the same counting consumer):",
		b.benchtoolLine("pty", "--pty-mib", fmt.Sprint(b.cfg.ptyMiB), "--pty-rounds", fmt.Sprint(b.cfg.ptyRounds), "--keystrokes", fmt.Sprint(b.cfg.keystrokes)),
		"cd "+shellQuote(b.cfg.workspace)+" && time "+shellJoin(append([]string{b.cfg.sandboxctl, "--socket", b.socket, "run", "--tty", "--preset", "workspace-write", "--"}, argv...))+" | wc -c   # adds sandboxctl's own copy",
		"time script -qc "+shellQuote(shellJoin(argv))+" /dev/null | wc -c   # roughly the raw side; benchtool reads the master itself")
	return nil
}

// ptyCPU is the CPU the daemon and benchtool itself have used so far.
func ptyCPU(daemon int) (daemonCPU, self time.Duration, err error) {
	ticks, err := cpuTicks(daemon)
	if err != nil {
		return 0, 0, fmt.Errorf("the daemon's CPU: %w", err)
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("getrusage: %w", err)
	}
	// /proc counts in clock ticks, 100 a second on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond, time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// median is the middle of v (the mean of the two middle ones for an even
// count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtFloats(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, f := range v {
		parts[i] = fmt.Sprintf(format, f)
	}
	return strings.Join(parts, " ")
}

// rawPTYRead runs argv unsandboxed on a local pty and copies the master to
// w until the slave side is gone, as a program that owns a terminal and
// hands its output on (script, a terminal emulator, an ssh server) does:
// reads of up to 32 KiB, each written to w.
func rawPTYRead(ctx context.Context, argv []string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		return fmt.Errorf("raw pty: start %q: %w", argv, err)
	}
	defer ptmx.Close()
	_, err = io.Copy(w, ptmx)
	// The master reads EIO once the last slave fd is closed: that is
	// the end of the output, not a failure.
	if err != nil && !errors.Is(err, syscall.EIO) {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("raw pty: read: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("raw pty: %q: %w", argv, err)
	}
	return nil
}

// echoShell makes the terminal raw and echoes each byte from the program,
// as an editor or a line-editing shell does, so the round trip goes through
// the sandboxed process and not only the terminal's own echo; R says the
// terminal is raw and cat is about to read.
var echoShell = []string{"sh", "-c", "stty raw -echo && printf R && exec cat"}

// byteStream turns writes into a channel of single bytes.
type byteStream chan byte

func (s byteStream) Write(p []byte) (int, error) {
	for _, c := range p {
		s <- c
	}
	return len(p), nil
}

// roundTrips sends one byte at a time with send and times until recv
// yields it back: warm-up rounds untimed, then n timed.
func roundTrips(ctx context.Context, n, warmup int, send func(byte) error, recv byteStream) (durations, error) {
	timeout := time.NewTimer(0)
	defer timeout.Stop()
	// The program says R once it is ready.
	wait := func(want byte) error {
		timeout.Reset(10 * time.Second)
		for {
			select {
			case c := <-recv:
				if c == want {
					return nil
				}
				return fmt.Errorf("echo: got %q, want %q", c, want)
			case <-timeout.C:
				return fmt.Errorf("echo: no %q within 10s", want)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if err := wait('R'); err != nil {
		return nil, fmt.Errorf("waiting for the echo program: %w", err)
	}
	var out durations
	for i := range warmup + n {
		c := byte('a' + i%26)
		begin := time.Now()
		if err := send(c); err != nil {
			return nil, err
		}
		if err := wait(c); err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, time.Since(begin))
		}
	}
	return out, nil
}

func (b *bench) keystrokes() error {
	start, err := b.startMsg(true, false, echoShell...)
	if err != nil {
		return err
	}
	n, warmup := b.cfg.keystrokes, max(b.cfg.warmup, 20)

	// sandboxd: keys go in through an io.Pipe as Stdin; the session is
	// killed at the end, as cat in a raw terminal never sees an EOF.
	inR, inW := io.Pipe()
	recv := make(byteStream, 64)
	ids := make(chan string, 1)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() {
		_, runErr = b.cl.Run(ctx, client.RunOptions{
			Start:     start,
			Stdin:     inR,
			Stdout:    recv,
			OnStarted: func(id string) { ids <- id },
		})
		// Unblock roundTrips if the session ends under it.
		inR.CloseWithError(io.ErrClosedPipe)
	})
	sd, sdErr := roundTrips(ctx, n, warmup, func(c byte) error {
		_, err := inW.Write([]byte{c})
		return err
	}, recv)
	select {
	case id := <-ids:
		if err := b.cl.Kill(context.WithoutCancel(ctx), id, 0); err != nil {
			warnf("keystrokes: kill session %s: %v", id, err)
		}
	default:
	}
	inW.Close()
	// Drain what the session still writes so Run can reach its Exit; Run
	// is the only writer, so recv can be closed once it has returned.
	go func() {
		for range recv {
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(recv); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
	}
	if sdErr != nil {
		if runErr != nil {
			return fmt.Errorf("keystrokes through sandboxd: %w (session: %v)", sdErr, runErr)
		}
		return fmt.Errorf("keystrokes through sandboxd: %w", sdErr)
	}

	raw, err := rawRoundTrips(b.ctx, n, warmup)
	if err != nil {
		return err
	}
	for _, p := range []struct {
		name   string
		pct    float64
		target time.Duration
	}{{"p50", 50, 500 * time.Microsecond}, {"p99", 99, 0}} {
		v, c := sd.percentile(p.pct), raw.percentile(p.pct)
		r := row{
			figure:      fmt.Sprintf("keystroke round trip %s (n=%d)", p.name, n),
			value:       ms(v),
			counterpart: "raw pty " + ms(c),
			ratio:       ratio(float64(v), float64(c)),
		}
		if p.target > 0 {
			r.target, r.verdict = "<= "+ms(p.target), verdict(v <= p.target)
		}
		b.add(r)
	}
	b.reproduce("keystroke round trip (one byte at a time, echoed by cat in a raw terminal):",
		b.benchtoolLine("pty", "--pty-mib", fmt.Sprint(b.cfg.ptyMiB), "--keystrokes", fmt.Sprint(n)),
		"raw side: "+shellJoin(echoShell)+" on a local pty opened by benchtool")
	return nil
}

// rawRoundTrips is the keystroke figure against a local pty.
func rawRoundTrips(ctx context.Context, n, warmup int) (durations, error) {
	cmd := exec.CommandContext(ctx, echoShell[0], echoShell[1:]...)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("raw pty: start %q: %w", echoShell, err)
	}
	recv := make(byteStream, 64)
	copied := make(chan struct{})
	go func() {
		// Ends with EIO when the program is killed; the samples are
		// taken by then.
		_, _ = io.Copy(recv, ptmx)
		close(copied)
	}()
	defer func() {
		cmd.Process.Kill()
		// Whatever the copy still delivers must not block it.
		go func() {
			for range recv {
			}
		}()
		<-copied
		close(recv)
		ptmx.Close()
		cmd.Wait()
	}()
	d, err := roundTrips(ctx, n, warmup, func(c byte) error {
		_, err := ptmx.Write([]byte{c})
		return err
	}, recv)
	if err != nil {
		return nil, fmt.Errorf("raw pty keystrokes: %w", err)
	}
	return d, nil
}
