package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestWriteEvent(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 11, 22, 10, 2, 11, 93e6, time.Local))
	for _, tc := range []struct {
		ev   *sandboxdv1.Event
		want string
	}{
		{&sandboxdv1.Event{Time: at, SessionId: "s1", Snapshot: true, Argv: []string{"sh", "a.sh"},
			Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{To: sandboxdv1.State_RUNNING}}},
			`10:02:11.093 s1 state running (snapshot) command="sh a.sh"`},
		{&sandboxdv1.Event{Time: at, SessionId: "c1", ParentId: "s1",
			Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_WAITING_FOR_INPUT}}},
			`10:02:11.093 c1 parent=s1 state running -> waiting-for-input`},
		{&sandboxdv1.Event{Time: at, SessionId: "s1",
			Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_KILLED, Signal: 9, Reason: "timeout"}}},
			`10:02:11.093 s1 state running -> killed signal=9 reason="timeout"`},
		{&sandboxdv1.Event{Time: at, SessionId: "s1",
			Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_WAITING_FOR_INPUT, To: sandboxdv1.State_EXITED, ExitCode: 3}}},
			`10:02:11.093 s1 state waiting-for-input -> exited code=3`},
		{&sandboxdv1.Event{Time: at, SessionId: "s1",
			Kind: &sandboxdv1.Event_Denial{Denial: &sandboxdv1.Denial{Field: "filesystem.write", Operation: "openat", Target: "/etc/x", Command: "sh", Pid: 8, Errno: "EROFS"}}},
			`10:02:11.093 s1 denied filesystem.write openat /etc/x by sh[8] (EROFS)`},
		{&sandboxdv1.Event{Time: at, SessionId: "s1",
			Kind: &sandboxdv1.Event_Denial{Denial: &sandboxdv1.Denial{Field: "network.allow", Operation: "connect", Target: "other.test:80", Errno: "EACCES", Detail: "other.test:80 not in network.allow"}}},
			`10:02:11.093 s1 denied network.allow connect other.test:80 (EACCES): other.test:80 not in network.allow`},
	} {
		var b strings.Builder
		if err := writeEvent(&b, tc.ev); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(b.String(), "\n"); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestEventRecordJSON(t *testing.T) {
	ev := &sandboxdv1.Event{Seq: 7, Time: timestamppb.Now(), SessionId: "s1",
		Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{From: sandboxdv1.State_RUNNING, To: sandboxdv1.State_EXITED}}}
	b, err := json.Marshal(client.Record(ev))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "state" || got["from"] != "running" || got["to"] != "exited" || got["exit_code"] != 0.0 || got["seq"] != 7.0 {
		t.Errorf("record %s", b)
	}
}
