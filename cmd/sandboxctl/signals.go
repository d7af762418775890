package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// linuxSignals are signal numbers as the wire carries them (Linux's), by
// name, so that sandboxctl on another OS sends what the daemon expects.
var linuxSignals = map[string]int32{
	"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12,
	"TERM": 15, "CONT": 18, "STOP": 19, "WINCH": 28,
}

// parseSignal accepts a number ("15") or a name ("TERM", "SIGTERM", "term").
func parseSignal(s string) (int32, error) {
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		if n < 0 || n > 64 {
			return 0, fmt.Errorf("signal %d out of range", n)
		}
		return int32(n), nil
	}
	if n, ok := linuxSignals[strings.TrimPrefix(strings.ToUpper(s), "SIG")]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

// forwardSignals delivers the signals sigs (of SIGINT, SIGTERM and
// SIGHUP) sent to sandboxctl to out as wire numbers, so that interrupting
// the client interrupts the sandboxed command (which runs in its own
// session and would not see them) instead of killing the client and
// leaving the daemon to tear down. The returned func stops forwarding.
func forwardSignals(out chan<- int32, sigs ...os.Signal) (stop func()) {
	in := make(chan os.Signal, 4)
	signal.Notify(in, sigs...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-in:
				var n int32
				switch sig {
				case syscall.SIGINT:
					n = linuxSignals["INT"]
				case syscall.SIGTERM:
					n = linuxSignals["TERM"]
				case syscall.SIGHUP:
					n = linuxSignals["HUP"]
				}
				select {
				case out <- n:
				case <-done:
					return
				}
			}
		}
	}()
	return func() {
		signal.Stop(in)
		close(done)
	}
}

// pendingSignals is forwardSignals being installed on a goroutine of its
// own. Installing takes a few hundred microseconds of the runtime's: its
// first signal.Notify starts two threads (one that receives signals, one
// that updates signal masks) and waits for the second once per signal,
// and stopping waits for it again. run installs while it reads its
// command line and dials, sends the Start without waiting for it, and
// waits for it once the session has started, so that a signal from then
// on reaches the command. A launch takes milliseconds, so that wait is
// over at once. A signal before the install ends sandboxctl, whose leaving
// kills the sandbox being launched before its command could be told; one
// after it waits in ch for the session's start and is forwarded then.
type pendingSignals struct {
	done chan struct{}
	ch   chan int32
	stop func()
}

// forwardSignalsAhead begins forwardSignals of sigs.
func forwardSignalsAhead(sigs ...os.Signal) *pendingSignals {
	p := &pendingSignals{done: make(chan struct{}), ch: make(chan int32, 4)}
	go func() {
		defer close(p.done)
		p.stop = forwardSignals(p.ch, sigs...)
	}()
	return p
}

// wait returns once forwarding is installed.
func (p *pendingSignals) wait() { <-p.done }

// release stops forwarding without waiting for the runtime, which a
// sandboxctl that is about to exit has no need to.
func (p *pendingSignals) release() {
	go func() {
		<-p.done
		p.stop()
	}()
}
