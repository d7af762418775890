//go:build linux || darwin

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// TestRunForwardsSignals raises SIGINT, SIGTERM and SIGHUP in this very
// process while sandboxctl run runs in it, as a user pressing ctrl-c, a
// supervisor stopping it or a closed terminal would: each reaches the
// session (the Kill RPC), and run exits as the command did, here 128+N.
// Forwarding is installed while run reads its command line and dials, and
// is in place once run has taken the session's Started, which it answers
// with the EOF of its stdin (/dev/null here): the signal is raised then.
func TestRunForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			d := &fakeDaemon{killed: make(chan *sandboxdv1.KillRequest, 1)}
			d.session = func(s sessionStream) error {
				req, err := s.Recv()
				if err != nil {
					return err
				}
				if req.GetStart() == nil {
					return fmt.Errorf("first message %v, want a Start", req)
				}
				if err := s.Send(startedMsg("r1")); err != nil {
					return err
				}
				if req, err := s.Recv(); err != nil || !req.GetStdin().GetEof() {
					return fmt.Errorf("after Started: %v, %v; want the EOF of stdin", req, err)
				}
				if err := syscall.Kill(os.Getpid(), sig); err != nil {
					return err
				}
				k := <-d.killed
				if k.GetId() != "r1" || k.GetSignal() != int32(sig) {
					return fmt.Errorf("kill %v, want r1 and signal %d", k, sig)
				}
				return s.Send(exitMsg(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, Signal: k.GetSignal()}))
			}
			sock := startDaemon(t, d)
			stdin, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var stdout, stderr strings.Builder
			c := &cli{stdin: stdin, stdout: &stdout, stderr: &stderr}
			if code := c.main(context.Background(), []string{"--socket", sock, "run", "--", "sleep", "60"}); code != 128+int(sig) {
				t.Errorf("code %d, want %d; stderr %q", code, 128+int(sig), stderr.String())
			}
		})
	}
}

func TestMayDetach(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--", "true"}, false},
		{[]string{"--tty", "--", "sh"}, false},
		{[]string{"--detach", "--", "sleep", "9"}, true},
		{[]string{"-detach", "sleep", "9"}, true},
		{[]string{"--detach=false", "--", "true"}, true},
		{[]string{"--", "sandboxctl", "run", "--detach"}, false},
		{[]string{"--env", "X=--detach", "--", "true"}, false},
	} {
		if got := mayDetach(tc.args); got != tc.want {
			t.Errorf("mayDetach(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
