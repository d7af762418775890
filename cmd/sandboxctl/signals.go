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
