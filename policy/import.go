package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// ImportOptions are what an importer needs to know of the caller that the
// settings file leaves implicit.
type ImportOptions struct {
	// Home is what "~" stands for. Absolute.
	Home string
	// Cwd is what relative paths are relative to, and the workspace of
	// tools that write their working directory. Absolute.
	Cwd string
	// TempDir is the caller's $TMPDIR, "" when it is unset. Codex makes
	// it writable in workspace-write mode.
	TempDir string
	// Lossy turns every key that has no exact equivalent from an error
	// into a warning, and the key is then imported narrower than the
	// source (usually dropped): the result never allows what the source
	// does not.
	Lossy bool
}

// KeyError names one key of a settings file that has no exact sandboxd
// equivalent, or that is malformed. Key is the key's path as written in
// the file, with indexes for list entries, e.g. "filesystem.denyRead[2]"
// or "sandbox_workspace_write.writable_roots[0]".
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// importer carries what both importers share: the options and the
// warnings given so far.
type importer struct {
	opts     ImportOptions
	warnings []*KeyError
}

// inexact reports that key has no exact equivalent. Under Lossy it records
// a warning and returns nil, and the caller imports the key narrower
// (narrower says how); otherwise it returns the error.
func (im *importer) inexact(key, msg, narrower string) error {
	if !im.opts.Lossy {
		return &KeyError{Key: key, Msg: msg}
	}
	im.warnings = append(im.warnings, &KeyError{Key: key, Msg: msg + "; " + narrower})
	return nil
}

// path resolves p as the tools do: "~" and "~/..." against Home, anything
// not absolute against Cwd.
func (im *importer) path(key, p string) (string, error) {
	switch {
	case p == "":
		return "", &KeyError{Key: key, Msg: "empty path"}
	case strings.ContainsRune(p, 0):
		return "", &KeyError{Key: key, Msg: fmt.Sprintf("%q contains a NUL byte", p)}
	case p == "~" || strings.HasPrefix(p, "~/"):
		if !filepath.IsAbs(im.opts.Home) {
			return "", &KeyError{Key: key, Msg: fmt.Sprintf("%q is under the home directory, which is unknown", p)}
		}
		return filepath.Join(im.opts.Home, p[1:]), nil
	case strings.HasPrefix(p, "~"):
		return "", &KeyError{Key: key, Msg: fmt.Sprintf("%q names another user's home directory; write the path out", p)}
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	case !filepath.IsAbs(im.opts.Cwd):
		return "", &KeyError{Key: key, Msg: fmt.Sprintf("%q is relative and the current directory is unknown", p)}
	}
	return filepath.Join(im.opts.Cwd, p), nil
}

// isGlob reports whether p has a glob pattern, which sandboxd paths
// cannot express: they are literal.
func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// globPrefix is the longest literal directory above p's first glob
// component: everything p can match lies within it.
func globPrefix(p string) string {
	i := strings.IndexAny(p, "*?[")
	return filepath.Dir(p[:i] + "x")
}

// protectGit adds a read-only carve-out for each of names to every write
// root of fs, as both tools keep a repository's hooks and configuration,
// which run outside the sandbox, out of the sandbox's reach. A carve-out
// that would hold another write root is left out: that root was asked for
// by name.
func protectGit(fs *sandboxdv1.Filesystem, names ...string) {
	for _, w := range fs.Write {
		for _, n := range names {
			c := filepath.Join(w, n)
			if !slices.ContainsFunc(fs.Write, func(r string) bool { return within(r, c) }) {
				fs.ReadOnly = append(fs.ReadOnly, c)
			}
		}
	}
}

// finish validates and normalizes what an importer built. A failure here is
// the importer's bug or a path sandboxd refuses; either way the key is not
// known any more, so the error names the policy field.
func (im *importer) finish(p *sandboxdv1.Policy) (*sandboxdv1.Policy, []*KeyError, error) {
	if err := Validate(p); err != nil {
		return nil, nil, fmt.Errorf("imported policy: %w", err)
	}
	return Normalize(p), im.warnings, nil
}
