package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

const wd = "/home/u"

func cmd(cwd string, argv ...string) *sandboxdv1.Command {
	return &sandboxdv1.Command{Argv: argv, Cwd: cwd}
}

func mustPreset(t *testing.T, name, workspace string) *sandboxdv1.Policy {
	t.Helper()
	p, err := policy.Preset(name, workspace)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writePolicy(t *testing.T, json string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(f, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseRun(t *testing.T) {
	hostFile := writePolicy(t, `{"filesystem": {"write": ["/srv"], "deny": ["/srv/secret"]}, "network": {"mode": "HOST"}}`)
	workspace := mustPreset(t, "workspace-write", "/home/u/proj")
	workspace.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}
	workspace.Filesystem.Deny = append(workspace.Filesystem.Deny, "/home/u/proj/.env")

	for _, tc := range []struct {
		name string
		args []string
		want *sandboxdv1.Start
	}{
		{
			name: "command only, in the current directory",
			args: []string{"--", "echo", "hi"},
			want: &sandboxdv1.Start{Policy: &sandboxdv1.Policy{}, Command: cmd(wd, "echo", "hi")},
		},
		{
			name: "flags end at the command without --",
			args: []string{"ls", "-l", "--tty"},
			want: &sandboxdv1.Start{Policy: &sandboxdv1.Policy{}, Command: cmd(wd, "ls", "-l", "--tty")},
		},
		{
			name: "relative paths are made absolute against the current directory",
			args: []string{"--write", "proj", "--write", "/tmp/out/", "--read-only", "proj/.git", "--deny", "../other", "--cwd", "proj/src", "--", "make"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
					Write:    []string{"/home/u/proj", "/tmp/out"},
					ReadOnly: []string{"/home/u/proj/.git"},
					Deny:     []string{"/home/other"},
				}},
				Command: cmd("/home/u/proj/src", "make"),
			},
		},
		{
			name: "network, environment, timeout and tty",
			args: []string{"--network", "host", "--env", "A=1", "--env", "B=x=y", "--env", "A=2", "--env", "EMPTY=", "--timeout", "90s", "--tty", "--", "sh"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
					Limits:  &sandboxdv1.Limits{Timeout: durationpb.New(90 * time.Second)},
				},
				Command: &sandboxdv1.Command{Argv: []string{"sh"}, Env: map[string]string{"A": "2", "B": "x=y", "EMPTY": ""}, Cwd: wd},
				Tty:     true,
			},
		},
		{
			name: "children allowed",
			args: []string{"--allow-children", "--", "worker"},
			want: &sandboxdv1.Start{Policy: &sandboxdv1.Policy{Children: &sandboxdv1.Children{Allow: true}}, Command: cmd(wd, "worker")},
		},
		{
			name: "a detached PTY session",
			args: []string{"--detach", "--tty", "--", "bash"},
			want: &sandboxdv1.Start{Policy: &sandboxdv1.Policy{}, Command: cmd(wd, "bash"), Tty: true, Detach: true},
		},
		{
			name: "flags add to a policy file and override its scalars",
			args: []string{"--policy", hostFile, "--write", "/data", "--network", "none", "--", "true"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Filesystem: &sandboxdv1.Filesystem{Write: []string{"/srv", "/data"}, Deny: []string{"/srv/secret"}},
					Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
				},
				Command: cmd(wd, "true"),
			},
		},
		{
			name: "preset workspace is --cwd",
			args: []string{"--preset", "workspace-write", "--cwd", "proj", "--network", "host", "--deny", "proj/.env", "--", "true"},
			want: &sandboxdv1.Start{Policy: workspace, Command: cmd("/home/u/proj", "true")},
		},
		{
			name: "preset workspace defaults to the current directory",
			args: []string{"--preset", "workspace-write", "true"},
			want: &sandboxdv1.Start{Policy: mustPreset(t, "workspace-write", wd), Command: cmd(wd, "true")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRun(tc.args, wd, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("parseRun(%q)\n got %v\nwant %v", tc.args, got, tc.want)
			}
		})
	}
}

func TestParseRunRejects(t *testing.T) {
	relative := writePolicy(t, `{"filesystem": {"write": ["relative/dir"]}}`)
	misspelt := writePolicy(t, `{"filesystem": {"denny": ["/etc"]}}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"only --", []string{"--write", "/tmp", "--"}, "missing command"},
		{"unknown network mode", []string{"--network", "allowlist", "true"}, `--network "allowlist": want none or host`},
		{"env without =", []string{"--env", "FOO", "true"}, `--env "FOO": want KEY=VALUE`},
		{"env without key", []string{"--env", "=v", "true"}, `--env "=v": want KEY=VALUE`},
		{"negative timeout", []string{"--timeout", "-1s", "true"}, "--timeout -1s: must not be negative"},
		{"bad timeout", []string{"--timeout", "soon", "true"}, "invalid value"},
		{"unknown preset", []string{"--preset", "yolo", "true"}, `unknown preset "yolo"`},
		{"empty path", []string{"--write", "", "true"}, "--write: empty path"},
		{"relative path in policy file", []string{"--policy", relative, "true"}, "is not absolute"},
		{"unknown field in policy file", []string{"--policy", misspelt, "true"}, "denny"},
		{"missing policy file", []string{"--policy", "/nonexistent/policy.json", "true"}, "no such file"},
		{"carve-out outside every writable root", []string{"--read-only", "/etc", "true"}, "filesystem.read_only[0]"},
		{"unknown flag", []string{"--wirte", "/tmp", "true"}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRun(tc.args, wd, io.Discard)
			if err == nil {
				t.Fatalf("parseRun(%q) = %v, want error", tc.args, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestParseRunRelativePathWithoutWorkingDirectory(t *testing.T) {
	_, err := parseRun([]string{"--write", "proj", "true"}, "", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "current directory is unknown") {
		t.Errorf("err = %v", err)
	}
}

func TestParseRunHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseRun([]string{"--help"}, wd, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"--write", "made\nabsolute", "--policy file must", "125", "--detach", "sandboxctl\nattach ID"} {
		if !strings.Contains(strings.ReplaceAll(out.String(), "\n", " "), strings.ReplaceAll(want, "\n", " ")) {
			t.Errorf("help does not mention %q:\n%s", want, out.String())
		}
	}
}
