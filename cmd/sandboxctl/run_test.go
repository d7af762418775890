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
	allowFile := writePolicy(t, `{"network": {"mode": "ALLOWLIST", "allow": [{"host": "pypi.org", "port": 443}]},
		"limits": {"memory_bytes": "1073741824", "pids": 10, "cpu_millis": 2000, "output_bytes": "5", "timeout": "60s"}}`)
	allowlist := func(entries ...*sandboxdv1.NetworkAllow) *sandboxdv1.Network {
		return &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: entries}
	}
	allow := func(host string, port uint32) *sandboxdv1.NetworkAllow {
		return &sandboxdv1.NetworkAllow{Host: host, Port: port}
	}
	workspaceAllow := mustPreset(t, "workspace-write", wd)
	workspaceAllow.Network = allowlist(allow("example.org", 443))
	workspaceAllow.Limits.MemoryBytes = 512 << 20
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
			name: "allow-host selects allowlist",
			args: []string{"--allow-host", "example.org:443", "--allow-host", "*.example.net", "--allow-host", "[::1]:8080", "--allow-host", "10.0.0.1", "--", "curl"},
			want: &sandboxdv1.Start{
				Policy:  &sandboxdv1.Policy{Network: allowlist(allow("example.org", 443), allow("*.example.net", 0), allow("::1", 8080), allow("10.0.0.1", 0))},
				Command: cmd(wd, "curl"),
			},
		},
		{
			name: "network allowlist with allow-host",
			args: []string{"--network", "allowlist", "--allow-host", "::1", "--", "curl"},
			want: &sandboxdv1.Start{Policy: &sandboxdv1.Policy{Network: allowlist(allow("::1", 0))}, Command: cmd(wd, "curl")},
		},
		{
			name: "allow-host adds to a policy file's allowlist",
			args: []string{"--policy", allowFile, "--allow-host", "files.pythonhosted.org:443", "--", "pip"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Network: allowlist(allow("pypi.org", 443), allow("files.pythonhosted.org", 443)),
					Limits:  &sandboxdv1.Limits{MemoryBytes: 1 << 30, Pids: 10, CpuMillis: 2000, OutputBytes: 5, Timeout: durationpb.New(time.Minute)},
				},
				Command: cmd(wd, "pip"),
			},
		},
		{
			name: "allow-host narrows a policy file's host network",
			args: []string{"--policy", hostFile, "--allow-host", "example.org", "--", "true"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Filesystem: &sandboxdv1.Filesystem{Write: []string{"/srv"}, Deny: []string{"/srv/secret"}},
					Network:    allowlist(allow("example.org", 0)),
				},
				Command: cmd(wd, "true"),
			},
		},
		{
			name: "network none drops a policy file's allowlist",
			args: []string{"--policy", allowFile, "--network", "none", "--", "true"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
					Limits:  &sandboxdv1.Limits{MemoryBytes: 1 << 30, Pids: 10, CpuMillis: 2000, OutputBytes: 5, Timeout: durationpb.New(time.Minute)},
				},
				Command: cmd(wd, "true"),
			},
		},
		{
			name: "limits",
			args: []string{"--memory", "64M", "--pids", "100", "--cpus", "0.5", "--output-limit", "1.5K", "--", "make"},
			want: &sandboxdv1.Start{
				Policy:  &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{MemoryBytes: 64 << 20, Pids: 100, CpuMillis: 500, OutputBytes: 1536}},
				Command: cmd(wd, "make"),
			},
		},
		{
			name: "largest limits",
			args: []string{"--memory", "18446744073709551615", "--pids", "4294967295", "--cpus", "4294967.295", "--output-limit", "16777215T", "--", "make"},
			want: &sandboxdv1.Start{
				Policy:  &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{MemoryBytes: 1<<64 - 1, Pids: 1<<32 - 1, CpuMillis: 1<<32 - 1, OutputBytes: 16777215 << 40}},
				Command: cmd(wd, "make"),
			},
		},
		{
			name: "limits override a policy file's, which the rest keep",
			args: []string{"--policy", allowFile, "--memory", "2GiB", "--cpus", "4", "--", "make"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Network: allowlist(allow("pypi.org", 443)),
					Limits:  &sandboxdv1.Limits{MemoryBytes: 2 << 30, Pids: 10, CpuMillis: 4000, OutputBytes: 5, Timeout: durationpb.New(time.Minute)},
				},
				Command: cmd(wd, "make"),
			},
		},
		{
			name: "pids and output-limit override a policy file's with timeout",
			args: []string{"--policy", allowFile, "--pids", "1", "--output-limit", "1m", "--timeout", "5s", "--", "make"},
			want: &sandboxdv1.Start{
				Policy: &sandboxdv1.Policy{
					Network: allowlist(allow("pypi.org", 443)),
					Limits:  &sandboxdv1.Limits{MemoryBytes: 1 << 30, Pids: 1, CpuMillis: 2000, OutputBytes: 1 << 20, Timeout: durationpb.New(5 * time.Second)},
				},
				Command: cmd(wd, "make"),
			},
		},
		{
			name: "preset with allow-host and memory",
			args: []string{"--preset", "workspace-write", "--allow-host", "example.org:443", "--memory", "512M", "--", "true"},
			want: &sandboxdv1.Start{Policy: workspaceAllow, Command: cmd(wd, "true")},
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
	otherHome := writePolicy(t, `{"filesystem": {"write": ["~root/dir"]}}`)
	misspelt := writePolicy(t, `{"filesystem": {"denny": ["/etc"]}}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"only --", []string{"--write", "/tmp", "--"}, "missing command"},
		{"unknown network mode", []string{"--network", "wifi", "true"}, `--network "wifi": want none, host or allowlist`},
		{"allowlist without hosts", []string{"--network", "allowlist", "true"}, "--network allowlist needs at least one --allow-host"},
		{"allow-host with network none", []string{"--network", "none", "--allow-host", "a.example.org", "true"},
			"--allow-host a.example.org with --network none: --allow-host selects network allowlist; drop --network none or write --network allowlist"},
		{"allow-host with network host", []string{"--allow-host", "a.example.org", "--network", "host", "true"}, "with --network host"},
		{"allow-host top-level wildcard", []string{"--allow-host", "*.org:443", "true"}, `--allow-host "*.org:443": host "*.org" admits every name under the top-level domain "org"`},
		{"allow-host bare star", []string{"--allow-host", "*", "true"}, `--allow-host "*": host "*" is a wildcard for every name`},
		{"allow-host port 0", []string{"--allow-host", "example.org:0", "true"}, `--allow-host "example.org:0": port "0" is not a number from 1 to 65535`},
		{"allow-host port too big", []string{"--allow-host", "example.org:65536", "true"}, `--allow-host "example.org:65536": port "65536"`},
		{"allow-host URL", []string{"--allow-host", "https://example.org", "true"}, `--allow-host "https://example.org": a URL`},
		{"allow-host empty", []string{"--allow-host", "", "true"}, `--allow-host "": no host`},
		{"allow-host zone", []string{"--allow-host", "[fe80::1%eth0]:80", "true"}, "zone"},
		{"allow-host second entry", []string{"--allow-host", "a.example.org", "--allow-host", "a..b", "true"}, `--allow-host "a..b": host "a..b" has an empty label`},
		{"memory unit", []string{"--memory", "64X", "true"}, `--memory "64X": unknown unit "X"`},
		{"memory zero", []string{"--memory", "0", "true"}, `--memory "0": must be above 0; leave the flag out for no limit`},
		{"memory zero with unit", []string{"--memory", "0M", "true"}, `--memory "0M": must be above 0`},
		{"memory negative", []string{"--memory", "-1M", "true"}, `--memory "-1M": a size cannot be negative`},
		{"memory too large", []string{"--memory", "16777216T", "true"}, `--memory "16777216T": too large`},
		{"memory empty", []string{"--memory=", "true"}, `--memory "": not a size`},
		{"output-limit garbage", []string{"--output-limit", "lots", "true"}, `--output-limit "lots": not a size`},
		{"output-limit zero", []string{"--output-limit", "0", "true"}, `--output-limit "0": must be above 0`},
		{"output-limit fraction of a byte", []string{"--output-limit", "1.5", "true"}, `--output-limit "1.5": a byte count has no fraction`},
		{"pids zero", []string{"--pids", "0", "true"}, `--pids "0": want a whole number from 1 to 4294967295`},
		{"pids too many", []string{"--pids", "4294967296", "true"}, `--pids "4294967296": want a whole number from 1 to 4294967295`},
		{"pids negative", []string{"--pids", "-1", "true"}, `--pids "-1"`},
		{"pids fraction", []string{"--pids", "1.5", "true"}, `--pids "1.5"`},
		{"cpus zero", []string{"--cpus", "0", "true"}, `--cpus "0": below the smallest quota, 0.001 CPU`},
		{"cpus below a thousandth", []string{"--cpus", "0.0004", "true"}, `--cpus "0.0004": below the smallest quota`},
		{"cpus too many", []string{"--cpus", "4294967.2955", "true"}, `--cpus "4294967.2955": above the largest quota, 4294967.295 CPUs`},
		{"cpus far too many", []string{"--cpus", "99999999999999999999", "true"}, `--cpus "99999999999999999999": above the largest quota`},
		{"cpus negative", []string{"--cpus", "-1", "true"}, `--cpus "-1": want a decimal number of CPUs`},
		{"cpus exponent", []string{"--cpus", "1e3", "true"}, `--cpus "1e3": want a decimal number`},
		{"cpus NaN", []string{"--cpus", "NaN", "true"}, `--cpus "NaN": want a decimal number`},
		{"cpus no digits after the point", []string{"--cpus", "1.", "true"}, `--cpus "1.": want a decimal number`},
		{"cpus no digits before the point", []string{"--cpus", ".5", "true"}, `--cpus ".5": want a decimal number`},
		{"cpus empty", []string{"--cpus=", "true"}, `--cpus "": want a decimal number`},
		{"pids empty", []string{"--pids=", "true"}, `--pids ""`},
		{"env without =", []string{"--env", "FOO", "true"}, `--env "FOO": want KEY=VALUE`},
		{"env without key", []string{"--env", "=v", "true"}, `--env "=v": want KEY=VALUE`},
		{"negative timeout", []string{"--timeout", "-1s", "true"}, "--timeout -1s: must not be negative"},
		{"bad timeout", []string{"--timeout", "soon", "true"}, "--timeout soon: not a duration"},
		{"timeout without unit", []string{"--timeout", "5", "true"}, "--timeout 5: missing unit, e.g. 5s"},
		{"unknown preset", []string{"--preset", "yolo", "true"}, `unknown preset "yolo"`},
		{"empty path", []string{"--write", "", "true"}, "--write: empty path"},
		{"another user's home in policy file", []string{"--policy", otherHome, "true"}, "names another user's home"},
		{"unknown field in policy file", []string{"--policy", misspelt, "true"}, "denny"},
		{"missing policy file", []string{"--policy", "/nonexistent/policy.json", "true"}, "no such file"},
		{"carve-out outside every writable root", []string{"--read-only", "/etc", "true"}, "filesystem.read_only[0]"},
		{"unknown flag", []string{"--wirte", "/tmp", "true"}, "unknown flag --wirte; did you mean --write?"},
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

// Inside a sandbox a carve-out alone is the daemon's to check: it keeps the
// sandbox's write roots, which the client does not know.
func TestParseRunInSandboxLeavesInheritanceToTheDaemon(t *testing.T) {
	t.Setenv(sessionEnv, "0123456789abcdef")
	got, err := parseRun([]string{"--read-only", "/w/.git", "true"}, wd, io.Discard)
	if err != nil {
		t.Fatalf("parseRun: %v", err)
	}
	if fs := got.GetPolicy().GetFilesystem(); len(fs.GetWrite()) != 0 || len(fs.GetReadOnly()) != 1 || fs.GetReadOnly()[0] != "/w/.git" {
		t.Errorf("filesystem %v, want the carve-out alone", fs)
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
	for _, want := range []string{"--write", "made\nabsolute", "in a --policy file", "125", "--detach", "sandboxctl\nattach ID",
		"-allow-host PATTERN[:PORT]", "[::1]:443", "-memory SIZE", "1024-based", "-cpus N", "-pids N", "-output-limit SIZE", "none, host or allowlist"} {
		if !strings.Contains(strings.ReplaceAll(out.String(), "\n", " "), strings.ReplaceAll(want, "\n", " ")) {
			t.Errorf("help does not mention %q:\n%s", want, out.String())
		}
	}
}

func TestParseCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"0.001", 1},
		{"0.0005", 1}, // rounds to the nearest thousandth
		{"0.0015", 2},
		{"0.00149999", 1},
		{"0.5", 500},
		{"1", 1000},
		{"2", 2000},
		{"2.25", 2250},
		{"1.2345", 1235},
		{"0001.5", 1500},
		{"4294967.295", 1<<32 - 1},
		{"4294967.2954", 1<<32 - 1},
	} {
		got, err := parseCPUs(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseCPUs(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
