package policy

import (
	"fmt"
	"path/filepath"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// presetNames lists the presets in the order PresetNames reports them.
var presetNames = []string{"read-only", "workspace-write", "full-access"}

// PresetNames returns the names Preset accepts.
func PresetNames() []string {
	return append([]string(nil), presetNames...)
}

// Preset returns the named preset as a normalized policy:
//
//   - "read-only": read everything, write nothing, no network.
//   - "workspace-write": read everything, write workspace except its .git
//     directory (so a sandboxed tool cannot rewrite history or install git
//     hooks that run outside the sandbox), no network. workspace must be an
//     absolute path.
//   - "full-access": read and write everything, the host's network.
//
// No preset allows child sandboxes or sets limits. workspace is ignored by
// the presets that do not use it.
func Preset(name, workspace string) (*sandboxdv1.Policy, error) {
	p := Default()
	switch name {
	case "read-only":
	case "workspace-write":
		if msg := checkPath(workspace); msg != "" {
			return nil, fmt.Errorf("preset workspace-write: workspace %s", msg)
		}
		ws := filepath.Clean(workspace)
		p.Filesystem.Write = []string{ws}
		p.Filesystem.ReadOnly = []string{filepath.Join(ws, ".git")}
	case "full-access":
		p.Filesystem.Write = everything()
		p.Network.Mode = sandboxdv1.Network_HOST
	default:
		return nil, fmt.Errorf("unknown preset %q (valid: %s)", name, strings.Join(presetNames, ", "))
	}
	return Normalize(p), nil
}
