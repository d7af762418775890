package launcherdarwin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// kernelRecord is a record of the kernel's Seatbelt as `log stream --style
// ndjson` prints it: every field it has, slashes escaped as `log` escapes
// them, newlines of the message as \n.
func kernelRecord(t *testing.T, msg string) string {
	t.Helper()
	return record(t, map[string]any{"eventMessage": msg})
}

func record(t *testing.T, override map[string]any) string {
	t.Helper()
	r := map[string]any{
		"traceID":                  int64(1441151880758558724),
		"eventMessage":             "",
		"eventType":                "logEvent",
		"source":                   nil,
		"formatString":             "%s",
		"activityIdentifier":       0,
		"subsystem":                "",
		"category":                 "",
		"threadID":                 1234567,
		"senderImageUUID":          "9E8E0C52-5A4A-3C31-9E3B-4C1B0E0B5F8A",
		"backtrace":                map[string]any{"frames": []any{map[string]any{"imageOffset": 123456, "imageUUID": "9E8E0C52-5A4A-3C31-9E3B-4C1B0E0B5F8A"}}},
		"bootUUID":                 "",
		"processImagePath":         "/kernel",
		"senderImagePath":          "/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox",
		"timestamp":                "2025-06-01 10:20:30.123456-0700",
		"machTimestamp":            int64(98765432101234),
		"messageType":              "Error",
		"processImageUUID":         "F2A7C0E4-6B0B-3B5E-8E2D-2B2A1F7C9D11",
		"processID":                0,
		"senderProgramCounter":     987654,
		"parentActivityIdentifier": 0,
		"timezoneName":             "",
	}
	for k, v := range override {
		if v == nil {
			delete(r, k)
		} else {
			r[k] = v
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "/", `\/`)
}

var loggedAt = time.Date(2025, 6, 1, 17, 20, 30, 123456000, time.UTC)

func TestParseViolation(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Violation
	}{
		{
			name: "file write, tag on the next line",
			line: `{"traceID":1441151880758558724,"eventMessage":"Sandbox: touch(4242) deny(1) file-write-create \/private\/var\/tmp\/x\nsandboxd-session:s1","eventType":"logEvent","source":null,"formatString":"%s","activityIdentifier":0,"subsystem":"","category":"","threadID":2816593,"senderImageUUID":"9E8E0C52-5A4A-3C31-9E3B-4C1B0E0B5F8A","backtrace":{"frames":[{"imageOffset":123456,"imageUUID":"9E8E0C52-5A4A-3C31-9E3B-4C1B0E0B5F8A"}]},"bootUUID":"","processImagePath":"\/kernel","senderImagePath":"\/System\/Library\/Extensions\/Sandbox.kext\/Contents\/MacOS\/Sandbox","timestamp":"2025-06-01 10:20:30.123456-0700","machTimestamp":98765432101234,"messageType":"Error","processImageUUID":"F2A7C0E4-6B0B-3B5E-8E2D-2B2A1F7C9D11","processID":0,"senderProgramCounter":987654,"parentActivityIdentifier":0,"timezoneName":""}`,
			want: Violation{Session: "s1", Pid: 4242, Process: "touch", Operation: "file-write-create", Target: "/private/var/tmp/x", Time: loggedAt},
		},
		{
			name: "process name with spaces and parentheses",
			line: `{"eventMessage":"Sandbox: Google Chrome Helper (Renderer)(812) deny(1) file-read-data \/Users\/me\/.ssh\/id_ed25519\nsandboxd-session:abc-DEF_1.2","processImagePath":"\/kernel","senderImagePath":"\/System\/Library\/Extensions\/Sandbox.kext\/Contents\/MacOS\/Sandbox","processID":0,"timestamp":"2025-06-01 10:20:30.123456-0700"}`,
			want: Violation{Session: "abc-DEF_1.2", Pid: 812, Process: "Google Chrome Helper (Renderer)", Operation: "file-read-data", Target: "/Users/me/.ssh/id_ed25519", Time: loggedAt},
		},
		{
			name: "no target",
			line: kernelRecord(t, "Sandbox: sh(77) deny(1) process-fork\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 77, Process: "sh", Operation: "process-fork", Time: loggedAt},
		},
		{
			name: "network address",
			line: kernelRecord(t, "Sandbox: curl(901) deny(1) network-outbound 93.184.216.34:443\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 901, Process: "curl", Operation: "network-outbound", Target: "93.184.216.34:443", Time: loggedAt},
		},
		{
			name: "unix socket",
			line: kernelRecord(t, "Sandbox: nc(902) deny(1) network-outbound /private/var/run/sandboxd.sock\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 902, Process: "nc", Operation: "network-outbound", Target: "/private/var/run/sandboxd.sock", Time: loggedAt},
		},
		{
			name: "target with spaces",
			line: kernelRecord(t, "Sandbox: cp(55) deny(1) file-write-create /Users/me/My Projects/out file.txt\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 55, Process: "cp", Operation: "file-write-create", Target: "/Users/me/My Projects/out file.txt", Time: loggedAt},
		},
		{
			name: "tag appended on the same line",
			line: kernelRecord(t, "Sandbox: ls(56) deny(1) file-read-data /Users/me/Documents sandboxd-session:s2"),
			want: Violation{Session: "s2", Pid: 56, Process: "ls", Operation: "file-read-data", Target: "/Users/me/Documents", Time: loggedAt},
		},
		{
			name: "tag after a label on its own line",
			line: kernelRecord(t, "Sandbox: ls(57) deny(1) file-read-data /Users/me/Documents\nmessage: sandboxd-session:s2"),
			want: Violation{Session: "s2", Pid: 57, Process: "ls", Operation: "file-read-data", Target: "/Users/me/Documents", Time: loggedAt},
		},
		{
			name: "a tag the sandbox spelled in the target does not win",
			line: kernelRecord(t, "Sandbox: touch(58) deny(1) file-write-create /private/tmp/sandboxd-session:victim\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 58, Process: "touch", Operation: "file-write-create", Target: "/private/tmp/sandboxd-session:victim", Time: loggedAt},
		},
		{
			name: "a repeated refusal",
			line: kernelRecord(t, "41 duplicate reports for Sandbox: cat(59) deny(1) file-read-data /etc/master.passwd\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 59, Process: "cat", Operation: "file-read-data", Target: "/etc/master.passwd", Time: loggedAt},
		},
		{
			name: "ioctl",
			line: kernelRecord(t, `Sandbox: stty(60) deny(1) file-ioctl path:/dev/ttys004 ioctl-command:(_IOW "t", 103, struct termios)`+"\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 60, Process: "stty", Operation: "file-ioctl", Target: `path:/dev/ttys004 ioctl-command:(_IOW "t", 103, struct termios)`, Time: loggedAt},
		},
		{
			name: "a mach service",
			line: kernelRecord(t, "Sandbox: python3(61) deny(1) mach-lookup com.apple.pasteboard.1\nsandboxd-session:s1"),
			want: Violation{Session: "s1", Pid: 61, Process: "python3", Operation: "mach-lookup", Target: "com.apple.pasteboard.1", Time: loggedAt},
		},
		{
			name: "a time log could not be read is left out",
			line: record(t, map[string]any{"eventMessage": "Sandbox: sh(62) deny(1) process-fork\nsandboxd-session:s1", "timestamp": "yesterday"}),
			want: Violation{Session: "s1", Pid: 62, Process: "sh", Operation: "process-fork"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseViolation([]byte(tt.line))
			if !ok {
				t.Fatalf("not parsed: %s", tt.line)
			}
			if !got.Time.Equal(tt.want.Time) {
				t.Errorf("time %v, want %v", got.Time, tt.want.Time)
			}
			got.Time, tt.want.Time = time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseViolationRejects(t *testing.T) {
	tagged := "Sandbox: cat(100) deny(1) file-read-data /private/etc/master.passwd\nsandboxd-session:s1"
	tests := []struct{ name, line string }{
		{"the stream's header", `Filtering the log data using "senderImagePath ENDSWITH[c] \"Sandbox\" AND composedMessage CONTAINS \"sandboxd-session:\""`},
		{"an empty line", ""},
		{"truncated JSON", kernelRecord(t, tagged)[:80]},
		{"no tag", kernelRecord(t, "Sandbox: cat(100) deny(1) file-read-data /private/etc/master.passwd")},
		{"a tag without an id", kernelRecord(t, "Sandbox: cat(100) deny(1) file-read-data /private/etc/master.passwd\nsandboxd-session:")},
		{"not a Seatbelt report", kernelRecord(t, "System Policy: cat(100) deny(1) file-read-data /private/etc/master.passwd\nsandboxd-session:s1")},
		{"no operation", kernelRecord(t, "Sandbox: cat(100) deny(1)\nsandboxd-session:s1")},
		{"no pid", kernelRecord(t, "Sandbox: cat deny(1) file-read-data /x\nsandboxd-session:s1")},
		{"logged by a process", record(t, map[string]any{"eventMessage": tagged, "processID": 4242, "processImagePath": "/private/tmp/forge"})},
		{"logged by a process claiming to be the kernel", record(t, map[string]any{"eventMessage": tagged, "processID": 4242})},
		{"no pid of the logger", record(t, map[string]any{"eventMessage": tagged, "processID": nil})},
		{"another image of the kernel", record(t, map[string]any{"eventMessage": tagged, "senderImagePath": "/System/Library/Extensions/AppleMobileFileIntegrity.kext/Contents/MacOS/AppleMobileFileIntegrity"})},
		{"a lookalike sender", record(t, map[string]any{"eventMessage": tagged, "senderImagePath": "/private/tmp/Sandbox.kext/Contents/MacOS/Sandbox"})},
		{"not the kernel", record(t, map[string]any{"eventMessage": tagged, "processImagePath": "/usr/libexec/sandboxd"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, ok := ParseViolation([]byte(tt.line)); ok {
				t.Errorf("parsed %+v from %s", v, tt.line)
			}
		})
	}
}

func TestViolationDenial(t *testing.T) {
	pol := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Read:     sandboxdv1.Filesystem_ALL,
			Write:    []string{"/Users/me/work"},
			ReadOnly: []string{"/Users/me/work/.git"},
			Deny:     []string{"/Users/me/.ssh"},
		},
		Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
	}
	plan, err := NewPlan(launcher.PlanRequest{Policy: pol, SessionID: "s1", UID: 501}, PlanHost{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		op, target           string
		field, deniedOperand string
	}{
		{"file-write-create", "/private/var/tmp/x", "filesystem.write", "/private/var/tmp/x"},
		{"file-write-data", "/Users/me/work/.git/config", "filesystem.read_only", "/Users/me/work/.git/config"},
		{"file-write-unlink", "/Users/me/work/.git", "filesystem.read_only", "/Users/me/work/.git"},
		{"file-read-data", "/Users/me/.ssh/id_ed25519", "filesystem.deny", "/Users/me/.ssh/id_ed25519"},
		{"file-write-create", "/Users/me/.ssh/authorized_keys", "filesystem.deny", "/Users/me/.ssh/authorized_keys"},
		{"process-exec*", "/Users/me/.ssh/helper", "filesystem.deny", "/Users/me/.ssh/helper"},
		{"network-outbound", "93.184.216.34:443", "network.mode", "93.184.216.34:443"},
		{"network-outbound", "/private/var/run/sandboxd.sock", "network.mode", "unix:/private/var/run/sandboxd.sock"},
		{"network-bind", "local:*:8080", "network.mode", "local:*:8080"},
		{"file-ioctl", `path:/dev/ttys004 ioctl-command:(_IOW "t", 103, struct termios)`, "process", "/dev/ttys004"},
		{"process-fork", "", "process", ""},
		{"signal", "", "process", ""},
		{"sysctl-read", "kern.proc.all", "process", "kern.proc.all"},
	}
	for _, tt := range tests {
		v := Violation{Session: "s1", Pid: 4242, Process: "probe", Operation: tt.op, Target: tt.target, Time: loggedAt}
		d := v.Denial(plan)
		if d.GetField() != tt.field || d.GetTarget() != tt.deniedOperand || d.GetOperation() != tt.op {
			t.Errorf("%s %s: field %q target %q operation %q, want %q %q %q", tt.op, tt.target, d.GetField(), d.GetTarget(), d.GetOperation(), tt.field, tt.deniedOperand, tt.op)
		}
		if d.GetPid() != 4242 || d.GetHostPid() != 4242 || d.GetCommand() != "probe" || d.GetErrno() != "EPERM" || !d.GetTime().AsTime().Equal(loggedAt) {
			t.Errorf("%s: denial %v", tt.op, d)
		}
	}

	before := time.Now()
	d := Violation{Session: "s1", Pid: 1, Process: "sh", Operation: "process-fork"}.Denial(plan)
	if at := d.GetTime().AsTime(); at.Before(before) || at.After(time.Now()) {
		t.Errorf("a violation without a time is stamped %v, want the time it was read", at)
	}
}

func TestParsedViolationDenial(t *testing.T) {
	pol := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_ALL, Deny: []string{"/Users/me/.aws"}},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
	}
	plan, err := NewPlan(launcher.PlanRequest{Policy: pol, SessionID: "s1", UID: 501}, PlanHost{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := ParseViolation([]byte(kernelRecord(t, "Sandbox: aws(3001) deny(1) file-read-data /Users/me/.aws/credentials\n"+plan.Tag)))
	if !ok {
		t.Fatal("the plan's own tag is not recognised")
	}
	if v.Session != "s1" {
		t.Errorf("session %q, want s1", v.Session)
	}
	if d := v.Denial(plan); d.GetField() != "filesystem.deny" || d.GetTarget() != "/Users/me/.aws/credentials" || d.GetCommand() != "aws" {
		t.Errorf("denial %v", d)
	}
}
