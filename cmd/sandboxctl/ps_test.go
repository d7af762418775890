package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// family is a session table as the daemon lists it (not in creation
// order): a root with two children and a grandchild, a second root, and a
// session whose parent has gone from the list.
func family() []*sandboxdv1.SessionInfo {
	now := time.Now()
	at := func(minutesAgo int) *timestamppb.Timestamp {
		return timestamppb.New(now.Add(-time.Duration(minutesAgo)*time.Minute - 10*time.Second))
	}
	running := sandboxdv1.State_RUNNING
	return []*sandboxdv1.SessionInfo{
		{Id: "c2", ParentId: "r1", State: running, Pid: 13, Created: at(5), Argv: []string{"make", "test"}, Viewers: 1},
		{Id: "r1", State: running, Pid: 10, Created: at(20), Argv: []string{"agent"}, Viewers: 2},
		{Id: "o1", ParentId: "gone", State: sandboxdv1.State_EXITED, Created: at(15), Argv: []string{"true"}},
		{Id: "g1", ParentId: "c1", State: sandboxdv1.State_WAITING_FOR_INPUT, Pid: 12, Created: at(7), Argv: []string{"python3", "-i"}, Viewers: 1, DenialCount: 3},
		{Id: "c1", ParentId: "r1", State: running, Pid: 11, Created: at(9), Argv: []string{"worker"}, Detached: true},
		{Id: "r2", State: running, Pid: 20, Created: at(3), Argv: []string{"sleep", "100"}, Detached: true, Viewers: 1},
	}
}

func TestPsTree(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{sessions: family()})
	code, stdout, stderr := sandboxctl(t, "", "--socket", sock, "ps", "-a", "--tree")
	want := `ID        STATE              PID  AGE  DENIALS  VIEWERS       PARENT  COMMAND
r1        running            10   20m  0        2                     agent
├─ c1     running            11   9m   0        0 (detached)  r1      worker
│  └─ g1  waiting-for-input  12   7m   3        1             c1      python3 -i
└─ c2     running            13   5m   0        1             r1      make test
o1        exited             0    15m  0        0             gone    true
r2        running            20   3m   0        1 (detached)          sleep 100
`
	if code != 0 || stderr != "" || stdout != want {
		t.Errorf("code %d, stderr %q, stdout\n%s\nwant\n%s", code, stderr, stdout, want)
	}
	code, stdout, _ = sandboxctl(t, "", "--socket", sock, "ps", "-a", "--tree", "-q")
	if code != 0 || stdout != "r1\nc1\ng1\nc2\no1\nr2\n" {
		t.Errorf("ps --tree -q: code %d, stdout %q", code, stdout)
	}
}

func TestPsFlatKeepsTheDaemonsOrder(t *testing.T) {
	sock := startDaemon(t, &fakeDaemon{sessions: family()})
	code, stdout, _ := sandboxctl(t, "", "--socket", sock, "ps", "-a")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 7 {
		t.Fatalf("code %d, stdout\n%s", code, stdout)
	}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != "c2 running 13 5m 0 1 r1 make test" {
		t.Errorf("first row %q", lines[1])
	}
	if got := strings.Fields(lines[5]); strings.Join(got, " ") != "c1 running 11 9m 0 0 (detached) r1 worker" {
		t.Errorf("detached child row %q", lines[5])
	}
}

func TestTreeRowsSurvivesAParentLoop(t *testing.T) {
	rows := treeRows([]*sandboxdv1.SessionInfo{{Id: "a", ParentId: "b"}, {Id: "b", ParentId: "a"}, {Id: "s", ParentId: "s"}})
	var got []string
	for _, r := range rows {
		got = append(got, r.branch+r.s.GetId())
	}
	if strings.Join(got, ",") != "s,a,└─ b" {
		t.Errorf("rows %q", got)
	}
}
