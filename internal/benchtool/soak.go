//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// soak is issue 22's load figure: --soak-clients clients, each with a
// connection of its own, dial and run one session at the same moment, as a
// burst of agents would; every one must succeed (the client rides out a
// busy daemon). Then the daemon's CPU while --sessions sessions sit idle.
func (b *bench) soak() error {
	start, err := b.startMsg(false, false, "/bin/sh", "-c", "exit 7")
	if err != nil {
		return err
	}
	n := b.cfg.soakClients
	var done, failed atomic.Int64
	var firstErr error
	var once sync.Once
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-gate
			err := func() error {
				c, err := client.Dial(b.ctx, b.socket)
				if err != nil {
					return err
				}
				defer c.Close()
				res, err := c.Run(b.ctx, client.RunOptions{Start: proto.Clone(start).(*sandboxdv1.Start)})
				if err != nil {
					return err
				}
				if code := client.ExitCode(res, nil); code != 7 {
					return fmt.Errorf("session %s ended %s, exit code %d, want 7: %s", res.SessionID, res.Exit.GetState(), code, res.Exit.GetReason())
				}
				return nil
			}()
			if err != nil {
				failed.Add(1)
				once.Do(func() { firstErr = err })
				return
			}
			done.Add(1)
		})
	}
	begin := time.Now()
	close(gate)
	wg.Wait()
	elapsed := time.Since(begin)
	if err := b.ctx.Err(); err != nil {
		return err
	}
	rate := float64(done.Load()) / elapsed.Seconds()
	b.add(row{
		figure: fmt.Sprintf("soak, %d clients at once", n),
		value:  fmt.Sprintf("%.0f launches/s (%v)", rate, elapsed.Round(time.Millisecond)),
		target: "every one succeeds",
	})
	b.add(row{
		figure:  "soak errors",
		value:   fmt.Sprintf("%d of %d", failed.Load(), n),
		target:  "0",
		verdict: verdict(failed.Load() == 0),
	})
	if firstErr != nil {
		b.note("soak: first error: %v", firstErr)
	}

	cpu, held, err := b.idleCPU()
	if err != nil {
		return err
	}
	b.add(row{
		figure: fmt.Sprintf("daemon CPU, %d idle sessions", held),
		value:  fmt.Sprintf("%.1f%% of a core", cpu),
	})
	b.reproduce(fmt.Sprintf("soak (%d clients at once, then the daemon's utime+stime over %v with %d idle sessions):", n, idleCPUWindow, b.cfg.sessions),
		b.benchtoolLine("soak", "--soak-clients", fmt.Sprint(n), "--sessions", fmt.Sprint(b.cfg.sessions)))
	return nil
}

// idleCPU starts --sessions idle sessions, lets the daemon's checks of them
// settle to their slowest rate, and measures the daemon's CPU (user and
// system, in percent of one core) over idleCPUWindow.
func (b *bench) idleCPU() (float64, int, error) {
	pid, err := daemonPID(b.socket)
	if err != nil {
		return 0, 0, fmt.Errorf("the daemon's pid: %w", err)
	}
	var sessions sessionSet
	defer func() {
		if err := b.killSessions(&sessions); err != nil {
			warnf("soak: %v", err)
		}
	}()
	r := b.rampUp("soak, idle sessions", b.cfg.sessions, b.startIdle(&sessions))
	if r.started < b.cfg.sessions {
		b.note("soak: idle sessions: %s", r)
	}
	held, err := b.waitLive(r.started, time.Minute)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-time.After(idleSettle):
	case <-b.ctx.Done():
		return 0, 0, b.ctx.Err()
	}
	before, err := cpuTicks(pid)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-time.After(idleCPUWindow):
	case <-b.ctx.Done():
		return 0, 0, b.ctx.Err()
	}
	after, err := cpuTicks(pid)
	if err != nil {
		return 0, 0, err
	}
	// /proc counts in clock ticks, 100 a second on Linux.
	return float64(after-before) / idleCPUWindow.Seconds(), held, nil
}

// The input checks of an idle session back off to one every 10 s within
// about 13 s of its last output; the window then covers several rounds.
const (
	idleSettle    = 20 * time.Second
	idleCPUWindow = 30 * time.Second
)

// cpuTicks is utime+stime of pid, from /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it do not.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var sum int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += v
	}
	return sum, nil
}
