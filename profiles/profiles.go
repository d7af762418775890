// Package profiles holds agent profiles: named, versioned policy fragments
// that let an agent CLI run in a sandbox, kept as JSON data files. A
// profile names the directories under the caller's home the agent writes
// (its state, configuration and caches), the API hosts it needs, and the
// environment variables it reads. Profiles for codex, claude-code,
// opencode, gemini-cli and aider are built in; users add their own, or
// replace a built-in one, with NAME.json in a profile directory.
package profiles

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

//go:embed builtin/*.json
var builtin embed.FS

// Builtin is the origin of the profiles shipped in this package.
const Builtin = "built-in"

// Profile is an agent profile as its file holds it.
type Profile struct {
	// Name is the file's name without .json.
	Name string `json:"-"`
	// Version is the profile's own revision, raised when what it allows
	// changes, so that a policy can say which it was made from.
	Version int `json:"version"`
	// Description says which agent, and how it is installed.
	Description string `json:"description"`
	// Write are the agent's directories, each "~/..." under the caller's
	// home: write roots, made if missing.
	Write []string `json:"write"`
	// AllowHosts are PATTERN[:PORT] entries as --allow-host takes them:
	// the network becomes an allowlist of them.
	AllowHosts []string `json:"allow_hosts"`
	// Env are variables the agent reads, passed from the caller's
	// environment when set there.
	Env []string `json:"env"`
	// SetEnv are variables set for the agent; a value starting with "~/"
	// is under the caller's home.
	SetEnv map[string]string `json:"set_env"`
}

// Found is a profile and where it was loaded from: Builtin or a file.
type Found struct {
	*Profile
	Origin string
	// Shadowed is set when a profile of the same name earlier in the
	// search order is the one --profile uses.
	Shadowed bool
}

// Dirs are the directories user profiles are looked up in, before the
// built-in ones: the user's own, then the system's (on Windows, which has
// no /etc, under %ProgramData%).
func Dirs(home string) []string {
	var dirs []string
	if filepath.IsAbs(home) {
		dirs = append(dirs, filepath.Join(home, ".config", "sandboxd", "profiles"))
	}
	if runtime.GOOS == "windows" {
		if pd := os.Getenv("ProgramData"); filepath.IsAbs(pd) {
			dirs = append(dirs, filepath.Join(pd, "sandboxd", "profiles"))
		}
		return dirs
	}
	return append(dirs, "/etc/sandboxd/profiles")
}

// validName reports whether name can be a profile's: it becomes a file
// name, so it must not reach outside the profile directory.
func validName(name string) bool {
	return name != "" && strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == "" && !strings.HasPrefix(name, ".")
}

// Parse decodes and checks the profile file of name. Unknown fields are
// an error, as in a policy file: a misspelt key silently dropped would
// give the agent other rights than its author meant.
func Parse(name string, data []byte) (*Profile, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	p := &Profile{Name: name}
	if err := d.Decode(p); err != nil {
		return nil, fmt.Errorf("profile %s: %w", name, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("profile %s: data after the JSON object", name)
	}
	if p.Version < 1 {
		return nil, fmt.Errorf("profile %s: version: want a revision from 1", name)
	}
	for i, w := range p.Write {
		rel, ok := strings.CutPrefix(w, "~/")
		if !ok || filepath.Clean(rel) != rel || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("profile %s: write[%d] %q: want a clean path under the home directory, as in ~/.agent", name, i, w)
		}
	}
	for i, h := range p.AllowHosts {
		if _, err := policy.ParseAllow(h); err != nil {
			return nil, fmt.Errorf("profile %s: allow_hosts[%d]: %w", name, i, err)
		}
	}
	for i, e := range p.Env {
		if e == "" || strings.ContainsAny(e, "=\x00") {
			return nil, fmt.Errorf("profile %s: env[%d] %q: want a variable name", name, i, e)
		}
	}
	for k := range p.SetEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("profile %s: set_env: %q: want a variable name", name, k)
		}
	}
	return p, nil
}

// Load finds the profile name in dirs, in order, then among the built-in
// ones.
func Load(name string, dirs []string) (*Found, error) {
	if !validName(name) {
		return nil, fmt.Errorf("profile %q: a name has only lower-case letters, digits, '-', '_' and '.'", name)
	}
	for _, dir := range dirs {
		file := filepath.Join(dir, name+".json")
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", name, err)
		}
		p, err := Parse(name, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return &Found{Profile: p, Origin: file}, nil
	}
	data, err := builtin.ReadFile("builtin/" + name + ".json")
	if err != nil {
		return nil, &NotFoundError{Name: name}
	}
	p, err := Parse(name, data)
	if err != nil {
		return nil, err
	}
	return &Found{Profile: p, Origin: Builtin}, nil
}

// NotFoundError says that no profile has the name asked for.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("no profile %q", e.Name) }

// List returns every profile in dirs and the built-in ones, sorted by
// name and then in search order, each marked Shadowed unless it is the
// one Load finds. A file that does not parse is an error naming it.
func List(dirs []string) ([]*Found, error) {
	var all []*Found
	add := func(name string, data []byte, origin string) error {
		p, err := Parse(name, data)
		if err != nil {
			if origin == Builtin {
				return err
			}
			return fmt.Errorf("%s: %w", origin, err)
		}
		all = append(all, &Found{Profile: p, Origin: origin})
		return nil
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("profiles: %w", err)
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || !validName(name) || e.IsDir() {
				continue
			}
			file := filepath.Join(dir, e.Name())
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("profiles: %w", err)
			}
			if err := add(name, data, file); err != nil {
				return nil, err
			}
		}
	}
	entries, err := builtin.ReadDir("builtin")
	if err != nil {
		return nil, fmt.Errorf("built-in profiles: %w", err)
	}
	for _, e := range entries {
		data, err := builtin.ReadFile("builtin/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("built-in profiles: %w", err)
		}
		if err := add(strings.TrimSuffix(e.Name(), ".json"), data, Builtin); err != nil {
			return nil, err
		}
	}
	// Stable, so that entries of one name stay in search order.
	slices.SortStableFunc(all, func(a, b *Found) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(all); i++ {
		all[i].Shadowed = all[i].Name == all[i-1].Name
	}
	return all, nil
}

// Applied is what a profile adds to a session for a caller.
type Applied struct {
	// Policy is the fragment to merge (see policy.Merge): the write roots
	// and, with hosts, a network allowlist.
	Policy *sandboxdv1.Policy
	// MakeDirs are the write roots, to be made when missing.
	MakeDirs []string
	// Env are the variables for the command: HOME, so that the agent
	// finds its directories in the caller's home, what SetEnv sets and
	// what Env names that getenv has.
	Env map[string]string
}

// Apply resolves p for a caller whose home is home, reading the
// caller's environment through getenv.
func (p *Profile) Apply(home string, getenv func(string) string) (*Applied, error) {
	if !filepath.IsAbs(home) {
		return nil, fmt.Errorf("profile %s: the home directory is unknown", p.Name)
	}
	expand := func(s string) string {
		if rest, ok := strings.CutPrefix(s, "~/"); ok {
			return filepath.Join(home, rest)
		}
		return s
	}
	a := &Applied{Policy: &sandboxdv1.Policy{}, Env: map[string]string{"HOME": home}}
	if len(p.Write) > 0 {
		a.Policy.Filesystem = &sandboxdv1.Filesystem{}
		for _, w := range p.Write {
			a.Policy.Filesystem.Write = append(a.Policy.Filesystem.Write, expand(w))
		}
		a.MakeDirs = slices.Clone(a.Policy.Filesystem.Write)
	}
	if len(p.AllowHosts) > 0 {
		a.Policy.Network = &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST}
		for _, h := range p.AllowHosts {
			e, err := policy.ParseAllow(h)
			if err != nil {
				return nil, fmt.Errorf("profile %s: %w", p.Name, err)
			}
			a.Policy.Network.Allow = append(a.Policy.Network.Allow, e)
		}
	}
	for _, k := range p.Env {
		if v := getenv(k); v != "" {
			a.Env[k] = v
		}
	}
	for k, v := range p.SetEnv {
		a.Env[k] = expand(v)
	}
	return a, nil
}
