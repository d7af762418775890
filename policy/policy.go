// Package policy owns the meaning of the one canonical sandbox policy,
// sandboxdv1.Policy: it decodes, validates, normalizes, narrows (parent and
// child), digests, merges and builds presets of it, and parses the
// command-line forms of its allow entries and sizes. It is pure Go and makes
// no OS calls, so every backend and every OS sees the same meaning.
//
// The daemon calls Validate and then Normalize once, at the edge; backends
// only ever see normalized policies and never re-derive their meaning.
//
// Filesystem semantics, shared by every function here: a path is denied if
// it lies within (is equal to or below) a deny entry; otherwise it is
// writable if it lies within a write root and not within a read_only entry;
// it is readable if read is ALL, or, with read LISTED, if it lies within a
// read root or a write root (plus what the OS needs to run programs, which
// the backend decides). Deny wins over read_only, which wins over write.
//
// Paths are paths of the host the daemon runs on and are compared with
// path/filepath after filepath.Clean, lexically: symlinks are the backend's
// business at launch.
package policy

import (
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// FieldError says that one field of a policy is invalid. The daemon maps it
// to InvalidArgument and shows Field, so a user can find the offending entry.
type FieldError struct {
	// Field is the field path, with an index for list entries, e.g.
	// "filesystem.write[1]" or "network.allow[0].port".
	Field string
	// Msg says what is wrong with the value.
	Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// WidenError says that a child policy asks for more than its parent allows.
// Field is the child's field path, indexed into the child's lists as given.
type WidenError struct {
	Field string
	Msg   string
}

func (e *WidenError) Error() string { return e.Field + ": " + e.Msg }

// Default returns the policy that a nil or empty policy means: read
// everything not denied, write nothing, no network (a private loopback
// only), no limits, no child sandboxes. It is normalized.
func Default() *sandboxdv1.Policy {
	return &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_ALL},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
		Limits:     &sandboxdv1.Limits{},
		Children:   &sandboxdv1.Children{},
	}
}
