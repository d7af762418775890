package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func startedMsg(id string) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Started{Started: &sandboxdv1.Started{SessionId: id}}}
}

func outputMsg(s sandboxdv1.Output_Stream, data string) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Output{Output: &sandboxdv1.Output{Stream: s, Data: []byte(data)}}}
}

func exitMsg(e *sandboxdv1.Exit) *sandboxdv1.SessionResponse {
	return &sandboxdv1.SessionResponse{Msg: &sandboxdv1.SessionResponse_Exit{Exit: e}}
}

// recvAttach reads the first request of a stream, which must attach to id
// as readOnly says, without the enforcement report attach never prints.
func recvAttach(s sessionStream, id string, readOnly bool) (*sandboxdv1.Attach, error) {
	req, err := s.Recv()
	if err != nil {
		return nil, err
	}
	att := req.GetAttach()
	if att == nil || att.GetId() != id || att.GetReadOnly() != readOnly || !att.GetOmitEnforcement() {
		return nil, fmt.Errorf("first request %v, want an attach to %s, read-only %v, omitting the enforcement report", req, id, readOnly)
	}
	return att, nil
}

// sendAll sends rs in order.
func sendAll(s sessionStream, rs ...*sandboxdv1.SessionResponse) error {
	for _, r := range rs {
		if err := s.Send(r); err != nil {
			return err
		}
	}
	return nil
}

var (
	pipeSession = &sandboxdv1.SessionInfo{Id: "p1", State: sandboxdv1.State_RUNNING, Argv: []string{"worker"}, Detached: true}
	ttySession  = &sandboxdv1.SessionInfo{Id: "t1", State: sandboxdv1.State_RUNNING, Argv: []string{"bash"}, Tty: true, Detached: true}
)

func TestAttachInteractivePipeSession(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{pipeSession}, session: func(s sessionStream) error {
		if _, err := recvAttach(s, "p1", false); err != nil {
			return err
		}
		if err := sendAll(s, startedMsg("p1"), outputMsg(sandboxdv1.Output_STDOUT, "kept\n"), outputMsg(sandboxdv1.Output_STDERR, "kept err\n")); err != nil {
			return err
		}
		var in []byte
		for {
			req, err := s.Recv()
			if err != nil {
				return err
			}
			in = append(in, req.GetStdin().GetData()...)
			if req.GetStdin().GetEof() {
				break
			}
		}
		return sendAll(s, outputMsg(sandboxdv1.Output_STDOUT, "live: "+string(in)), exitMsg(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 3}))
	}})
	code, stdout, stderr := sandboxctl(t, "job\n", "--socket", sock, "attach", "p1")
	if code != 3 || stdout != "kept\nlive: job\n" || stderr != "kept err\n" {
		t.Errorf("code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestAttachSendsNothingItShouldNot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		readOnly bool
	}{
		{"read-only", []string{"--read-only"}, true},
		{"no stdin", []string{"--no-stdin"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan *sandboxdv1.SessionRequest, 8)
			d := &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{pipeSession}, killed: make(chan *sandboxdv1.KillRequest, 1)}
			d.session = func(s sessionStream) error {
				if _, err := recvAttach(s, "p1", tc.readOnly); err != nil {
					return err
				}
				if err := sendAll(s, startedMsg("p1"), outputMsg(sandboxdv1.Output_STDOUT, "kept\n")); err != nil {
					return err
				}
				go func() {
					for {
						req, err := s.Recv()
						if err != nil {
							return
						}
						got <- req
					}
				}()
				// Time for the input that is ready, and its end, to arrive
				// were they sent.
				time.Sleep(300 * time.Millisecond)
				return s.Send(exitMsg(&sandboxdv1.Exit{State: sandboxdv1.State_KILLED, Signal: 9, Reason: "killed by an operator"}))
			}
			sock := startDaemon(t, d)
			code, stdout, stderr := sandboxctl(t, "do not send\n", append([]string{"--socket", sock, "attach"}, append(tc.args, "p1")...)...)
			if code != 137 || stdout != "kept\n" || stderr != "sandboxctl: killed: killed by an operator\n" {
				t.Errorf("code %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			select {
			case req := <-got:
				t.Errorf("sent %v", req)
			default:
			}
		})
	}
}

func TestAttachDetachKeys(t *testing.T) {
	type seen struct {
		in  string
		eof bool
	}
	left := make(chan seen, 1)
	sock := startDaemon(t, &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{ttySession}, session: func(s sessionStream) error {
		if _, err := recvAttach(s, "t1", false); err != nil {
			return err
		}
		if err := sendAll(s, startedMsg("t1"), outputMsg(sandboxdv1.Output_STDOUT, "$ ")); err != nil {
			return err
		}
		var got seen
		for {
			req, err := s.Recv()
			if err != nil {
				left <- got
				return err
			}
			got.in += string(req.GetStdin().GetData())
			got.eof = got.eof || req.GetStdin().GetEof()
		}
	}})
	// A lone ctrl-p is input; ctrl-p ctrl-q leaves, and what follows stays here.
	code, stdout, stderr := sandboxctl(t, "ls\r\x10x\x10\x11exit\r", "--socket", sock, "attach", "t1")
	// The keys are all there from the start, so the client may leave
	// before or after the prompt arrives; either way nothing else shows.
	if code != 0 || (stdout != "$ " && stdout != "") || !strings.Contains(stderr, "detached from session t1") {
		t.Errorf("code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	select {
	case got := <-left:
		if got.in != "ls\r\x10x" || got.eof {
			t.Errorf("the session got %q, eof %v; want %q and no EOF", got.in, got.eof, "ls\r\x10x")
		}
	case <-time.After(5 * time.Second):
		t.Error("the stream did not end after the detach keys")
	}
}

func TestAttachErrors(t *testing.T) {
	busy := &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{pipeSession}, session: func(s sessionStream) error {
		if _, err := recvAttach(s, "p1", false); err != nil {
			return err
		}
		return status.Error(codes.FailedPrecondition, "session p1 already has an interactive client (attach read-only instead)")
	}}
	// The session went between Inspect and Attach.
	gone := &fakeDaemon{sessions: []*sandboxdv1.SessionInfo{pipeSession}, session: func(s sessionStream) error {
		return status.Error(codes.NotFound, `no session "p1"`)
	}}
	for _, tc := range []struct {
		name   string
		d      *fakeDaemon
		id     string
		code   int
		stderr string
	}{
		{"no such session", &fakeDaemon{}, "zzz", 1, "sandboxctl: attach zzz: no session \"zzz\"\n"},
		{"gone before the attach", gone, "p1", 1, "sandboxctl: attach p1: no session \"p1\"\n"},
		{"interactive taken", busy, "p1", 125, "sandboxctl: attach p1: session p1 already has an interactive client (attach read-only instead)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := startDaemon(t, tc.d)
			code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "attach", tc.id)
			if code != tc.code || stdout != "" || stderr != tc.stderr {
				t.Errorf("code %d, stdout %q, stderr %q; want %d, %q", code, stdout, stderr, tc.code, tc.stderr)
			}
		})
	}
}

func TestAttachUsage(t *testing.T) {
	if code, _, _ := sandboxctl(t, "", "attach"); code != exitUsage {
		t.Errorf("no id: code %d", code)
	}
	if code, _, _ := sandboxctl(t, "", "attach", "a", "b"); code != exitUsage {
		t.Errorf("two ids: code %d", code)
	}
	code, stdout, _ := sandboxctl(t, "", "attach", "--help")
	if code != 0 {
		t.Errorf("--help: code %d", code)
	}
	for _, want := range []string{"usage: sandboxctl attach [--read-only] [--no-stdin] ID", "ctrl-p ctrl-q", "--no-stdin", "Exits 1 when there is no session"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help does not mention %q:\n%s", want, stdout)
		}
	}
}
