package policy

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/BurntSushi/toml"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// codexWorkspaceKeys are the keys of [sandbox_workspace_write].
var codexWorkspaceKeys = []string{"writable_roots", "network_access", "exclude_tmpdir_env_var", "exclude_slash_tmp"}

// codexBuiltins maps Codex's built-in permission profiles to the
// sandbox_mode each is the same as.
var codexBuiltins = map[string]string{
	":read-only":          "read-only",
	":workspace":          "workspace-write",
	":danger-full-access": "danger-full-access",
}

// ImportCodex converts the sandbox settings of a Codex config.toml into a
// policy, which is validated and normalized. profile names the config
// profile ([profiles.NAME]) to apply, as codex --profile does; "" takes the
// file's top-level profile key, if any. The profile's sandbox_mode and
// sandbox_workspace_write keys override the top level's.
//
// sandbox_mode "read-only" reads everything and writes nothing;
// "danger-full-access" is the full-access preset; "workspace-write"
// writes opts.Cwd (the workspace), sandbox_workspace_write.writable_roots,
// $TMPDIR (opts.TempDir) unless exclude_tmpdir_env_var and /tmp unless
// exclude_slash_tmp, keeps .git and .codex in each read-only, as Codex
// does (sandboxd also when they do not exist yet, which is narrower), and
// has the host's network only with network_access. Without sandbox_mode,
// default_permissions may name a built-in permission profile (":read-only",
// ":workspace", ":danger-full-access"); a custom [permissions.NAME] profile
// is an error even with Lossy, since its path rules (globs, special paths,
// deny-read) have no importable narrowing that keeps reads within it.
// Neither set is inexact (Codex then decides by whether it trusts the
// project) and Lossy imports it as read-only.
//
// Keys that are not about the sandbox (model, approval_policy,
// mcp_servers, ...) are not looked at. An unknown key inside
// [sandbox_workspace_write] is an error.
func ImportCodex(data []byte, profile string, opts ImportOptions) (*sandboxdv1.Policy, []*KeyError, error) {
	im := &importer{opts: opts}
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, nil, fmt.Errorf("codex config: %w", err)
	}
	if profile == "" {
		if v, ok := doc["profile"]; ok {
			s, ok := v.(string)
			if !ok || s == "" {
				return nil, nil, &KeyError{Key: "profile", Msg: "want the name of a [profiles.NAME] table"}
			}
			profile = s
		}
	}
	layers := []struct {
		prefix string
		table  map[string]any
	}{{"", doc}}
	if profile != "" {
		profiles, _ := doc["profiles"].(map[string]any)
		t, ok := profiles[profile].(map[string]any)
		if !ok {
			return nil, nil, &KeyError{Key: "profiles." + profile, Msg: "no such profile"}
		}
		layers = append(layers, struct {
			prefix string
			table  map[string]any
		}{"profiles." + profile + ".", t})
	}

	mode, modeKey := "", ""
	workspace := map[string]any{}
	workspaceKeys := map[string]string{}
	for _, l := range layers {
		if v, ok := l.table["sandbox_mode"]; ok {
			modeKey = l.prefix + "sandbox_mode"
			s, ok := v.(string)
			if !ok {
				return nil, nil, &KeyError{Key: modeKey, Msg: "want read-only, workspace-write or danger-full-access"}
			}
			mode = s
		}
		if v, ok := l.table["sandbox_workspace_write"]; ok {
			key := l.prefix + "sandbox_workspace_write"
			t, ok := v.(map[string]any)
			if !ok {
				return nil, nil, &KeyError{Key: key, Msg: "want a table"}
			}
			for _, k := range sortedKeys(t) {
				if !slices.Contains(codexWorkspaceKeys, k) {
					return nil, nil, &KeyError{Key: key + "." + k, Msg: "unknown sandbox_workspace_write setting"}
				}
				workspace[k] = t[k]
				workspaceKeys[k] = key + "." + k
			}
		}
	}

	if mode == "" {
		if v, ok := doc["default_permissions"]; ok {
			name, ok := v.(string)
			if !ok || name == "" {
				return nil, nil, &KeyError{Key: "default_permissions", Msg: "want the name of a permission profile"}
			}
			m, builtin := codexBuiltins[name]
			if !builtin {
				return nil, nil, &KeyError{Key: "permissions." + name, Msg: "a custom permission profile; only the built-in ones (:read-only, :workspace, :danger-full-access) are imported"}
			}
			// Permission profiles leave the legacy table out of it.
			mode, modeKey, workspace = m, "default_permissions", map[string]any{}
		} else {
			if err := im.inexact("sandbox_mode", "not set, so Codex picks the mode by whether it trusts the project", "imported as read-only, the narrowest"); err != nil {
				return nil, nil, err
			}
			mode = "read-only"
		}
	}

	switch mode {
	case "read-only":
		return im.finish(Default())
	case "danger-full-access":
		p, err := Preset("full-access", "")
		if err != nil {
			return nil, nil, fmt.Errorf("codex danger-full-access: %w", err)
		}
		return im.finish(p)
	case "workspace-write":
	default:
		return nil, nil, &KeyError{Key: modeKey, Msg: fmt.Sprintf("%q: want read-only, workspace-write or danger-full-access", mode)}
	}

	p := Default()
	cwd, err := im.path("sandbox_mode", ".")
	if err != nil {
		return nil, nil, err
	}
	p.Filesystem.Write = []string{cwd}
	flag := func(k string) (bool, error) {
		v, ok := workspace[k]
		if !ok {
			return false, nil
		}
		b, ok := v.(bool)
		if !ok {
			return false, &KeyError{Key: workspaceKeys[k], Msg: "want true or false"}
		}
		return b, nil
	}
	if v, ok := workspace["writable_roots"]; ok {
		key := workspaceKeys["writable_roots"]
		roots, ok := v.([]any)
		if !ok {
			return nil, nil, &KeyError{Key: key, Msg: "want a list of paths"}
		}
		for i, r := range roots {
			k := fmt.Sprintf("%s[%d]", key, i)
			s, ok := r.(string)
			if !ok {
				return nil, nil, &KeyError{Key: k, Msg: "want a path"}
			}
			abs, err := im.path(k, s)
			if err != nil {
				return nil, nil, err
			}
			p.Filesystem.Write = append(p.Filesystem.Write, abs)
		}
	}
	noTmpdir, err := flag("exclude_tmpdir_env_var")
	if err != nil {
		return nil, nil, err
	}
	if !noTmpdir && opts.TempDir != "" {
		abs, err := im.path("exclude_tmpdir_env_var", opts.TempDir)
		if err != nil {
			return nil, nil, err
		}
		p.Filesystem.Write = append(p.Filesystem.Write, abs)
	}
	noSlashTmp, err := flag("exclude_slash_tmp")
	if err != nil {
		return nil, nil, err
	}
	// Only Unix hosts have a /tmp for Codex to open.
	if !noSlashTmp && filepath.IsAbs("/tmp") {
		p.Filesystem.Write = append(p.Filesystem.Write, "/tmp")
	}
	network, err := flag("network_access")
	if err != nil {
		return nil, nil, err
	}
	if network {
		p.Network.Mode = sandboxdv1.Network_HOST
	}
	protectGit(p.Filesystem, ".git", ".codex")
	return im.finish(p)
}
