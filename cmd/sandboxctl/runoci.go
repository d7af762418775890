package main

import (
	"fmt"
	"os"
	"path/filepath"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/socketpath"
	"github.com/sandboxd/sandboxd/oci"
)

// startOCI is run --oci: the config's process, under the policy read
// from it with the flags on top. What sandboxd would have to ignore of
// the config (hooks, devices, capabilities, unknown fields) is refused
// with its JSON path.
func (f *runFlags) startOCI(args []string, wd string) (*sandboxdv1.Start, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("--oci %s: the command is the config's process.args; give none after the flags", f.ociFile)
	}
	data, err := os.ReadFile(f.ociFile)
	if err != nil {
		return nil, policyError{fmt.Errorf("--oci: %w", err)}
	}
	// The daemon masks its own sockets in every sandbox; a config that
	// sandboxctl export-oci wrote masks them too.
	sock := socketpath.Default()
	im, err := oci.Import(data, []string{sock, filepath.Join(filepath.Dir(sock), "sandboxd-sessions")})
	if err != nil {
		return nil, policyError{fmt.Errorf("--oci %s: %w", f.ociFile, err)}
	}
	f.base = im.Policy
	// The config's environment first, so that --env overrides it.
	env := make(stringList, 0, len(im.Env)+len(f.env))
	for k, v := range im.Env {
		env = append(env, k+"="+v)
	}
	f.env = append(env, f.env...)
	if f.cwd == "" {
		f.cwd = im.Cwd
	}
	f.tty = f.tty || im.Terminal
	return f.start(im.Argv, wd)
}
