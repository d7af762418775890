package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

func TestImportVerb(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the settings name Unix paths")
	}
	dir, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("TMPDIR", "")
	t.Chdir(dir)
	write := func(name, data string) string {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	srt := write("srt.json", `{"filesystem":{"allowWrite":["."],"denyRead":["~/.ssh"]},"network":{"allowedDomains":["api.anthropic.com"]}}`)
	globs := write("globs.json", `{"filesystem":{"allowWrite":[".","~/.cache/*"]}}`)
	codex := write("config.toml", "sandbox_mode = \"read-only\"\n[profiles.w]\nsandbox_mode = \"workspace-write\"\n[profiles.w.sandbox_workspace_write]\nexclude_slash_tmp = true\n")

	for _, tc := range []struct {
		name             string
		args             []string
		code             int
		stdout, stderr   string
		policyWrite      []string
		policyDenyOrMode string
	}{
		{name: "srt", args: []string{"import", "srt", srt}, policyWrite: []string{dir}, policyDenyOrMode: filepath.Join(home, ".ssh")},
		{name: "srt glob refused", args: []string{"import", "srt", globs}, code: exitFailed,
			stderr: `sandboxctl import srt globs.json: filesystem.allowWrite[1]: "~/.cache/*" is a glob`},
		{name: "srt glob lossy, flag last", args: []string{"import", "srt", globs, "--lossy"}, policyWrite: []string{dir},
			stderr: `sandboxctl import: warning: filesystem.allowWrite[1]: "~/.cache/*" is a glob; sandboxd paths are literal; dropped`},
		{name: "codex profile", args: []string{"import", "codex", "--profile", "w", codex}, policyWrite: []string{dir}, policyDenyOrMode: "NONE"},
		{name: "codex top level", args: []string{"import", "codex", codex}, policyDenyOrMode: "NONE"},
		{name: "profile is codex's", args: []string{"import", "srt", "--profile", "w", srt}, code: exitUsage, stderr: "--profile is codex's"},
		{name: "unknown format", args: []string{"import", "cdex", codex}, code: exitUsage, stderr: `unknown format "cdex"; did you mean "codex"?`},
		{name: "missing file", args: []string{"import", "srt"}, code: exitUsage, stderr: "want a format, srt or codex, and a FILE"},
		{name: "unreadable", args: []string{"import", "srt", "nonexistent.json"}, code: exitFailed, stderr: "no such file"},
		{name: "help", args: []string{"import", "--help"}, stdout: "usage: sandboxctl import srt|codex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			c := &cli{stdin: os.Stdin, stdout: &out, stderr: &errOut}
			if code := c.main(context.Background(), tc.args); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.stderr) || (tc.stderr == "" && errOut.Len() > 0) {
				t.Errorf("stderr %q, want it to contain %q", errOut.String(), tc.stderr)
			}
			if tc.stdout != "" || tc.code != 0 {
				if !strings.Contains(out.String(), tc.stdout) {
					t.Errorf("stdout %q, want it to contain %q", out.String(), tc.stdout)
				}
				return
			}
			// What import prints is a --policy file run reads back as is.
			p, err := policy.DecodeFile(out.Bytes(), "/elsewhere", "/elsewhere")
			if err != nil {
				t.Fatalf("printed policy does not decode: %v\n%s", err, out.String())
			}
			if got := p.GetFilesystem().GetWrite(); strings.Join(got, " ") != strings.Join(tc.policyWrite, " ") {
				t.Errorf("write roots %q, want %q", got, tc.policyWrite)
			}
			if !strings.Contains(out.String(), tc.policyDenyOrMode) {
				t.Errorf("policy lacks %q:\n%s", tc.policyDenyOrMode, out.String())
			}
		})
	}
}

func TestImportVerbStdin(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the settings name Unix paths")
	}
	in := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(in, []byte("sandbox_mode = \"danger-full-access\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var out, errOut bytes.Buffer
	c := &cli{stdin: stdin, stdout: &out, stderr: &errOut}
	if code := c.main(context.Background(), []string{"import", "codex", "-"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"mode": "HOST"`) {
		t.Errorf("danger-full-access from stdin:\n%s", out.String())
	}
}
