package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAgentProfiles installs real agent CLIs from the npm registry (aider,
// the one shipped profile whose CLI is not there, comes from PyPI) and runs
// each one's --version through the daemon under its profile (sandboxctl
// run --profile), as a user would: the profile's directories are made in
// the caller's home, and the CLI, which reads its state directory at
// start, runs with nothing else writable and only its API hosts reachable.
func TestAgentProfiles(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the agent CLIs are installed from the npm registry")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the agent CLIs' launchers are node programs")
	}
	for _, tc := range []struct {
		profile, pkg, bin string
		version           *regexp.Regexp
		dirs              []string
	}{
		{"codex", "@openai/codex", "codex", regexp.MustCompile(`^codex-cli \d+\.\d+`), []string{".codex"}},
		{"claude-code", "@anthropic-ai/claude-code", "claude", regexp.MustCompile(`^\d+\.\d+\.\d+ \(Claude Code\)`), []string{".claude"}},
		{"gemini-cli", "@google/gemini-cli", "gemini", regexp.MustCompile(`^\d+\.\d+\.\d+`), []string{".gemini"}},
		{"opencode", "opencode-ai", "opencode", regexp.MustCompile(`^\d+\.\d+\.\d+`), []string{".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			f := newFixture(t)
			prefix := f.path("npm")
			npmInstall(t, npm, prefix, tc.pkg)
			home := f.mkdir("home")
			t.Setenv("HOME", home)
			r := sandboxctl(t, f.dir, "run", "--profile", tc.profile, "--", filepath.Join(prefix, "node_modules", ".bin", tc.bin), "--version")
			if suite.mechanism == "landlock" || !linuxHost.namespaces {
				// A profile's API hosts are a network allowlist, which
				// the landlock set has no network namespace for.
				if r.code != 125 || !strings.Contains(r.stderr, "cannot enforce network.mode") || !strings.Contains(r.stderr, "remedy:") {
					t.Fatalf("--profile %s without namespaces: exit %d, stderr %q; want the allowlist refused with a remedy", tc.profile, r.code, r.stderr)
				}
				t.Logf("refused, as the landlock set must: %s", r.stderr)
				return
			}
			if r.code != 0 || !tc.version.MatchString(r.stdout) {
				t.Fatalf("%s --version under --profile %s: exit %d, stdout %q, stderr %q; want %q", tc.bin, tc.profile, r.code, r.stdout, r.stderr, tc.version)
			}
			for _, d := range tc.dirs {
				if st, err := os.Stat(filepath.Join(home, d)); err != nil || !st.IsDir() {
					t.Errorf("profile directory ~/%s: %v", d, err)
				}
			}
			// The profile writes its directories and nothing else of home.
			r = sandboxctl(t, f.dir, "run", "--profile", tc.profile, "--", "/bin/sh", "-c", "touch ~/"+tc.dirs[0]+"/probe && ! touch ~/outside")
			if r.code != 0 {
				t.Errorf("writes under --profile %s: exit %d, stderr %q; want the profile's directory writable and the rest of home not", tc.profile, r.code, r.stderr)
			}
		})
	}
}

// npmInstall installs pkg under prefix as a user does (claude-code's
// install script puts its native binary in place).
func npmInstall(t *testing.T, npm, prefix, pkg string) {
	t.Helper()
	args := []string{"install", "--prefix", prefix, "--no-audit", "--no-fund", pkg}
	// --prefix moves npm's global config (PREFIX/etc/npmrc) too: the
	// machine's own settings, a CA file among them, are passed on by hand.
	if out, err := exec.Command(npm, "config", "get", "cafile").Output(); err == nil {
		if ca := strings.TrimSpace(string(out)); ca != "" && ca != "null" && ca != "undefined" {
			args = append(args, "--cafile", ca)
		}
	}
	if out, err := exec.Command(npm, args...).CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", pkg, err, out)
	}
}
