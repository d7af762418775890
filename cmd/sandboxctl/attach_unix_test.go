//go:build linux || darwin

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// TestAttachSignals raises signals in this very process while sandboxctl
// attach runs in it, as a user pressing ctrl-c or closing the terminal
// would.
func TestAttachSignals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		readOnly bool
		raise    syscall.Signal
		// forwarded: the signal reaches the session (Kill RPC) and ends it.
		forwarded bool
		code      int
	}{
		{"ctrl-c leaves a read-only attach", []string{"--read-only"}, true, syscall.SIGINT, false, 0},
		{"ctrl-c reaches the session of an interactive attach", []string{"--no-stdin"}, false, syscall.SIGINT, true, 128 + 2},
		{"a closed terminal leaves an interactive attach", []string{"--no-stdin"}, false, syscall.SIGHUP, false, 0},
		{"SIGTERM leaves an interactive attach", nil, false, syscall.SIGTERM, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			left := make(chan struct{})
			printed := make(chan struct{})
			stdout := &signallingWriter{done: printed}
			d := &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{pipeSession}, killed: make(chan *sandboxdv1.KillRequest, 1)}
			d.session = func(s sessionStream) error {
				if _, err := recvAttach(s, "p1", tc.readOnly); err != nil {
					return err
				}
				if err := sendAll(s, startedMsg("p1"), outputMsg(sandboxdv1.Output_STDOUT, "kept\n")); err != nil {
					return err
				}
				<-printed
				if err := syscall.Kill(os.Getpid(), tc.raise); err != nil {
					return err
				}
				if tc.forwarded {
					k := <-d.killed
					if k.GetId() != "p1" || k.GetSignal() != 2 {
						return fmt.Errorf("kill %v", k)
					}
					return s.Send(exitMsg(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: 2}))
				}
				<-s.Context().Done()
				close(left)
				return nil
			}
			sock := startDaemon(t, d)
			stdin, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var stderr strings.Builder
			c := &cli{stdin: stdin, stdout: stdout, stderr: &stderr}
			code := c.main(context.Background(), append([]string{"--socket", sock, "attach"}, append(tc.args, "p1")...))
			if code != tc.code || stdout.String() != "kept\n" || stderr.String() != "" {
				t.Errorf("code %d, stdout %q, stderr %q; want %d", code, stdout.String(), stderr.String(), tc.code)
			}
			if tc.forwarded {
				return
			}
			select {
			case <-left:
			case <-time.After(5 * time.Second):
				t.Error("the client did not leave")
			}
			select {
			case k := <-d.killed:
				t.Errorf("the signal reached the session: %v", k)
			default:
			}
		})
	}
}

// signallingWriter closes done after its first write.
type signallingWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	done chan struct{}
}

func (w *signallingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() == 0 {
		defer close(w.done)
	}
	return w.b.Write(p)
}

func (w *signallingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
