package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestRunProfile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the profiles name Unix paths")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("ANTHROPIC_API_KEY", "")

	start, err := parseRun([]string{"--profile", "codex", "--env", "CODEX_HOME=/elsewhere", "--", "codex", "--version"}, home, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	codexDir := filepath.Join(home, ".codex")
	if st, err := os.Stat(codexDir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("profile directory not made private: %v %v", st, err)
	}
	p := start.GetPolicy()
	if got := p.GetFilesystem().GetWrite(); len(got) != 1 || got[0] != codexDir {
		t.Errorf("write roots %q, want [%q]", got, codexDir)
	}
	n := p.GetNetwork()
	if n.GetMode() != sandboxdv1.Network_ALLOWLIST || len(n.GetAllow()) == 0 || n.GetAllow()[0].GetHost() != "api.openai.com" || n.GetAllow()[0].GetPort() != 443 {
		t.Errorf("network %v, want the profile's allowlist", n)
	}
	env := start.GetCommand().GetEnv()
	if env["HOME"] != home || env["OPENAI_API_KEY"] != "sk-test" || env["CODEX_HOME"] != "/elsewhere" {
		t.Errorf("env %v: want HOME, the key passed on and --env over the profile", env)
	}
	if _, ok := env["OPENAI_BASE_URL"]; ok {
		t.Errorf("env %v: a variable the caller does not have was set", env)
	}

	// The other flags go over the profile: --network none drops its hosts.
	start, err = parseRun([]string{"--profile", "claude-code", "--profile", "codex", "--network", "none", "--", "true"}, home, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if n := start.GetPolicy().GetNetwork(); n.GetMode() != sandboxdv1.Network_NONE || len(n.GetAllow()) != 0 {
		t.Errorf("network %v under --network none", n)
	}
	if got := start.GetPolicy().GetFilesystem().GetWrite(); len(got) != 3 {
		t.Errorf("two profiles' write roots: %q", got)
	}
	if env := start.GetCommand().GetEnv(); env["CLAUDE_CONFIG_DIR"] != filepath.Join(home, ".claude") {
		t.Errorf("env %v: want claude-code's CLAUDE_CONFIG_DIR", env)
	}

	_, err = parseRun([]string{"--profile", "codx", "--", "true"}, home, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--profile codx: no such profile; did you mean "codex"?`) {
		t.Errorf("unknown profile: %v", err)
	}
	if _, ok := err.(policyError); ok {
		t.Errorf("an unknown profile is a usage error, not a refusal")
	}
}

func TestProfilesVerb(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the profile directory is a Unix path")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := filepath.Join(home, ".config", "sandboxd", "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "aider.json")
	if err := os.WriteFile(mine, []byte(`{"version": 2, "description": "my aider", "write": ["~/.aider"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	c := &cli{stdin: os.Stdin, stdout: &out, stderr: &errOut}
	if code := c.main(context.Background(), []string{"profiles"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fields := func(i int) []string { return strings.Fields(lines[i]) }
	if len(lines) < 7 || fields(0)[0] != "NAME" {
		t.Fatalf("output:\n%s", out.String())
	}
	if f := fields(1); f[0] != "aider" || f[1] != "2" || f[2] != mine {
		t.Errorf("first aider line %q, want the user's, version 2", lines[1])
	}
	if f := fields(2); f[0] != "aider" || f[2] != "built-in" || f[3] != "(shadowed)" {
		t.Errorf("second aider line %q, want the built-in one, shadowed", lines[2])
	}
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "opencode"} {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("no %s in:\n%s", name, out.String())
		}
	}
	if code := c.main(context.Background(), []string{"profiles", "extra"}); code != exitUsage {
		t.Errorf("profiles extra: exit %d, want %d", code, exitUsage)
	}
}
