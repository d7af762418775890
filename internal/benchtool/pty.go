//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/sandboxd/sandboxd/api/client"
)

// counter counts what is written to it.
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func (b *bench) ptyFigures() error {
	if err := b.ptyThroughput(); err != nil {
		return err
	}
	return b.keystrokes()
}

func (b *bench) ptyThroughput() error {
	size := int64(b.cfg.ptyMiB) * mib
	argv := []string{"head", "-c", fmt.Sprintf("%dM", b.cfg.ptyMiB), "/dev/zero"}
	start, err := b.startMsg(true, false, argv...)
	if err != nil {
		return err
	}
	// The daemon reads its end of the terminal as fast as the client takes
	// the output, so this is the whole path: terminal, daemon, gRPC, client.
	var got counter
	sdTime, err := timed(func() error {
		res, err := b.cl.Run(b.ctx, client.RunOptions{Start: start, Stdout: &got, Stderr: &got})
		if err != nil {
			return err
		}
		if code := client.ExitCode(res, nil); code != 0 {
			return fmt.Errorf("pty session %s: %q exited %d: %s", res.SessionID, argv, code, res.Exit.GetReason())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got.n.Load() != size {
		return fmt.Errorf("pty session: received %d bytes of %d", got.n.Load(), size)
	}

	rawTime, rawN, err := rawPTYRead(b.ctx, argv)
	if err != nil {
		return err
	}
	if rawN != size {
		return fmt.Errorf("raw pty: read %d bytes of %d", rawN, size)
	}
	sdRate := float64(size) / 1e6 / sdTime.Seconds()
	rawRate := float64(size) / 1e6 / rawTime.Seconds()
	b.add(row{
		figure:      fmt.Sprintf("pty output, %d MiB through the daemon", b.cfg.ptyMiB),
		value:       fmt.Sprintf("%.0f MB/s", sdRate),
		counterpart: fmt.Sprintf("raw pty %.0f MB/s", rawRate),
		ratio:       ratio(sdRate, rawRate),
		target:      ">= 0.90x raw",
		verdict:     verdict(sdRate >= 0.9*rawRate),
	})
	b.reproduce("pty output (sandboxd, then a local pty read by benchtool itself):",
		b.benchtoolLine("pty", "--pty-mib", fmt.Sprint(b.cfg.ptyMiB), "--keystrokes", fmt.Sprint(b.cfg.keystrokes)),
		"cd "+shellQuote(b.cfg.workspace)+" && time "+shellJoin(append([]string{b.cfg.sandboxctl, "--socket", b.socket, "run", "--tty", "--preset", "workspace-write", "--"}, argv...))+" | wc -c   # adds sandboxctl's own copy",
		"time script -qc "+shellQuote(shellJoin(argv))+" /dev/null | wc -c   # roughly the raw side; benchtool reads the master itself")
	return nil
}

// rawPTYRead runs argv unsandboxed on a local pty, reads the master until
// the slave side is gone, and returns how long that took and how much came.
func rawPTYRead(ctx context.Context, argv []string) (time.Duration, int64, error) {
	var n int64
	d, err := timed(func() error {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		ptmx, err := pty.Start(cmd)
		if err != nil {
			return fmt.Errorf("raw pty: start %q: %w", argv, err)
		}
		defer ptmx.Close()
		n, err = io.Copy(io.Discard, ptmx)
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
	})
	return d, n, err
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
