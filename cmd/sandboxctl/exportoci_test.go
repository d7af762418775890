package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// exportable skips a test where export-oci refuses every config: see
// oci's test of the same name.
func exportable(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("sandboxd's seccomp tables exist for amd64 and arm64 only; this is %s", runtime.GOARCH)
	}
	if runtime.GOOS == "windows" {
		t.Skip("export-oci writes configs for Linux, whose paths a Windows policy cannot name")
	}
}

func exportOCI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdin: os.Stdin, stdout: &out, stderr: &errOut}
	code = c.main(context.Background(), append([]string{"--socket", "/nonexistent/sandboxd.sock", "export-oci"}, args...))
	return out.String(), errOut.String(), code
}

// export-oci then run --oci: the session run would start has the policy
// and the command exported, normalized.
func TestExportOCIThenRunOCI(t *testing.T) {
	exportable(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	config, stderr, code := exportOCI(t, "--write", dir, "--read-only", dir+"/.git", "--network", "host", "--pids", "64", "--env", "A=b", "--cwd", dir, "--", "make", "-j2")
	if code != 0 {
		t.Fatalf("export-oci exited %d: %s", code, stderr)
	}
	file := filepath.Join(dir, "config.json")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	start, err := parseRun([]string{"--oci", file}, "/", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Normalize(&sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{dir}, ReadOnly: []string{dir + "/.git"}},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
		Limits:     &sandboxdv1.Limits{Pids: 64},
	})
	if got := policy.Normalize(start.Policy); !proto.Equal(got, want) {
		t.Errorf("policy %v, want %v", got, want)
	}
	if cmd := start.Command; !slices.Equal(cmd.Argv, []string{"make", "-j2"}) || cmd.Cwd != dir || cmd.Env["A"] != "b" {
		t.Errorf("command %v", cmd)
	}
	if _, err := parseRun([]string{"--oci", file, "--", "sh"}, "/", os.Stderr); err == nil {
		t.Error("--oci with a command of its own was taken")
	}
}

func TestExportOCIRefusesWhatOCICannotSay(t *testing.T) {
	exportable(t)
	for flag, field := range map[string]string{
		"--allow-host=example.com:443": "network.allow",
		"--allow-children":             "children.allow",
		"--timeout=1m":                 "limits.timeout",
		"--output-limit=1M":            "limits.output_bytes",
	} {
		out, stderr, code := exportOCI(t, flag, "--", "true")
		if code == 0 || out != "" || !strings.Contains(stderr, "export-oci: "+field+": ") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a refusal naming %s", flag, code, out, stderr, field)
		}
	}
}

func TestRunOCIRefusesHooks(t *testing.T) {
	exportable(t)
	config, stderr, code := exportOCI(t, "--", "true")
	if code != 0 {
		t.Fatalf("export-oci exited %d: %s", code, stderr)
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		t.Fatal(err)
	}
	c["hooks"] = map[string]any{"createRuntime": []any{map[string]any{"path": "/bin/true"}}}
	b, _ := json.Marshal(c)
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := parseRun([]string{"--oci", file}, "/", os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "hooks: ") {
		t.Fatalf("want a refusal at hooks, got %v", err)
	}
}
