package profiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/policy"
)

// shipped are the profiles issue 27 asks for; each must be built in.
var shipped = []string{"aider", "claude-code", "codex", "gemini-cli", "opencode"}

// TestShippedGolden applies every built-in profile for a caller whose
// home is /home/u and compares the resulting policy (the profile over the
// default policy, normalized), the directories made and the environment
// with testdata/NAME.golden. go test -run TestShippedGolden -update
// rewrites them.
func TestShippedGolden(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the golden files hold Unix paths")
	}
	all, err := List(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range all {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, shipped) {
		t.Fatalf("built-in profiles %q, want %q", names, shipped)
	}
	for _, name := range shipped {
		t.Run(name, func(t *testing.T) {
			f, err := Load(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if f.Origin != Builtin {
				t.Errorf("origin %q", f.Origin)
			}
			// The caller has the first variable the profile reads, and
			// another it does not read.
			getenv := func(k string) string {
				if k == f.Env[0] || k == "UNRELATED" {
					return "value-of-" + k
				}
				return ""
			}
			a, err := f.Apply("/home/u", getenv)
			if err != nil {
				t.Fatal(err)
			}
			p := policy.Merge(policy.Default(), a.Policy)
			if err := policy.Validate(p); err != nil {
				t.Fatalf("resulting policy is invalid: %v", err)
			}
			enc, err := policy.Encode(policy.Normalize(p))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := json.Compact(&got, enc); err != nil {
				t.Fatal(err)
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, got.Bytes(), "", "  "); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&indented, "\nversion: %d\nmake dirs: %q\n", f.Version, a.MakeDirs)
			keys := make([]string, 0, len(a.Env))
			for k := range a.Env {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(&indented, "env: %s=%s\n", k, a.Env[k])
			}
			golden.Check(t, name+".golden", indented.Bytes())
		})
	}
}

func TestUserProfiles(t *testing.T) {
	user, system := t.TempDir(), t.TempDir()
	write := func(dir, name, data string) string {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	mine := write(user, "codex.json", `{"version": 7, "description": "mine", "write": ["~/.codex-work"]}`)
	write(system, "codex.json", `{"version": 3, "description": "site"}`)
	site := write(system, "site-agent.json", `{"version": 1, "description": "site agent", "allow_hosts": ["llm.corp.example:8443"]}`)
	write(system, "README", "not a profile")
	dirs := []string{user, system}

	f, err := Load("codex", dirs)
	if err != nil {
		t.Fatal(err)
	}
	if f.Origin != mine || f.Version != 7 {
		t.Errorf("codex from %s version %d, want the user's", f.Origin, f.Version)
	}
	if f, err := Load("site-agent", dirs); err != nil || f.Origin != site {
		t.Errorf("site-agent: %v, %v", f, err)
	}
	var nf *NotFoundError
	if _, err := Load("nope", dirs); !errors.As(err, &nf) {
		t.Errorf("missing profile: %v", err)
	}
	if _, err := Load("../codex", dirs); err == nil || errors.As(err, &nf) {
		t.Errorf("a name reaching outside the directory: %v", err)
	}

	all, err := List(dirs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range all {
		got = append(got, fmt.Sprintf("%s %s %v", f.Name, f.Origin, f.Shadowed))
	}
	want := []string{
		"aider built-in false", "claude-code built-in false",
		"codex " + mine + " false", "codex " + filepath.Join(system, "codex.json") + " true", "codex built-in true",
		"gemini-cli built-in false", "opencode built-in false", "site-agent " + site + " false",
	}
	if !slices.Equal(got, want) {
		t.Errorf("List:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	write(system, "broken.json", `{"version": 1, "wirte": ["~/.x"]}`)
	if _, err := List(dirs); err == nil || !strings.Contains(err.Error(), "broken.json") || !strings.Contains(err.Error(), "wirte") {
		t.Errorf("List with a broken file: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	for in, want := range map[string]string{
		`{"version": 1, "write": ["/abs"]}`:                    `write[0] "/abs": want a clean path under the home directory`,
		`{"version": 1, "write": ["~/"]}`:                      `write[0] "~/"`,
		`{"version": 1, "write": ["~/../other"]}`:              `write[0] "~/../other"`,
		`{"version": 1, "write": ["~/a/../b"]}`:                `write[0] "~/a/../b"`,
		`{"version": 1, "allow_hosts": ["https://x.example"]}`: `allow_hosts[0]: "https://x.example": a URL`,
		`{"version": 1, "env": ["A=B"]}`:                       `env[0] "A=B"`,
		`{"version": 1, "set_env": {"": "x"}}`:                 `set_env`,
		`{"write": ["~/.x"]}`:                                  `version`,
		`{"version": 1} {}`:                                    `data after the JSON object`,
	} {
		if _, err := Parse("p", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", in, err, want)
		}
	}
}

func TestDirs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the system directory is under %ProgramData% there")
	}
	if got, want := Dirs("/home/u"), []string{"/home/u/.config/sandboxd/profiles", "/etc/sandboxd/profiles"}; !slices.Equal(got, want) {
		t.Errorf("Dirs = %q, want %q", got, want)
	}
	if got := Dirs(""); !slices.Equal(got, []string{"/etc/sandboxd/profiles"}) {
		t.Errorf("Dirs without a home = %q", got)
	}
}
