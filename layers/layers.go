// Package layers keeps the copy-on-write layers of sessions whose policy
// has filesystem.layer: the daemon makes one per layered path on
// go.podman.io/storage's overlay driver, under its state directory, with
// the path itself as the lowest layer, and shows the sandbox the merged
// directory in the path's place. A layer outlives its session until it is
// reviewed (Diff) and applied to the path (Commit) or dropped (Discard).
package layers

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// Info describes one layer.
type Info struct {
	// ID is the storage library's id of the layer.
	ID string `json:"id"`
	// Session is the session the layer was made for.
	Session string `json:"session"`
	// Path is the layered host path.
	Path string `json:"path"`
	// ParentSession is the session whose layer of Path this one was
	// started on, "" for a layer on the path alone.
	ParentSession string `json:"parent_session,omitempty"`
	// Owner is the uid of the session's owner.
	Owner   uint32    `json:"owner"`
	Created time.Time `json:"created"`
	// Size is what the layer alone holds, in bytes (List fills it in).
	Size int64 `json:"-"`
}

// IDMap shows the layered path's owner and group, as the sandbox sees
// them through its layer, as the sandbox's own uid and gid: what it makes
// there is then owned by it in the layer, and a commit gives the files
// the path's owner. Other owners show as the overflow ids.
type IDMap struct {
	Owner, Group uint32
	UID, GID     uint32
}

// Owner is who a layered path is committed for: the session's owner,
// with the group and supplementary groups it had when it started the
// session. A commit changes the path with these ids as the kernel's
// filesystem credentials, so that it can make or change nothing there
// that the owner could not: root's (UID 0) changes it as root.
type Owner struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// Sandbox is who the session a layer is made for runs as.
type Sandbox struct {
	// UID and GID are the sandbox's ids: a path another uid owns is
	// shown to it through an ID-mapped mount (see IDMap).
	UID, GID uint32
	// OwnPathsOnly refuses a path the session's owner does not own: a
	// caller that is not root may layer only its own directories, which
	// its sandbox is shown as its own (see IDMap).
	OwnPathsOnly bool
}

// Kind is what happened to one path.
type Kind int

// The kinds of change. A rename is a deletion and an addition: an overlay
// without redirects records it so, and so does a review of the two trees.
const (
	Added Kind = iota + 1
	Modified
	Deleted
	// ModeChanged: only the permission bits differ.
	ModeChanged
)

func (k Kind) String() string {
	switch k {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	case ModeChanged:
		return "mode"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Change is one path the layer changes, relative to the layered path.
type Change struct {
	Path string
	Kind Kind
	// Type is "file", "dir", "symlink" or "other": after the change, or
	// before it for Deleted.
	Type             string
	OldMode, NewMode fs.FileMode
	Size             int64
	// baseDev and baseIno are the inode the comparison found at Path in
	// the layered path, for a change of an entry that was there: a
	// commit changes the mode of that inode only.
	baseDev, baseIno uint64
}

// Diff is what one layer changes.
type Diff struct {
	Layer   Info
	Changes []Change
	// Patch is a unified diff of the text files among Changes, when asked
	// for.
	Patch string
}

// ErrUnsupported says this OS or daemon cannot make layers; Unsupported
// errors wrap it with why. It is errors.ErrUnsupported too: something
// this host cannot do at all.
var ErrUnsupported error = unsupported{}

type unsupported struct{}

func (unsupported) Error() string { return "copy-on-write layers are not supported here" }

func (unsupported) Is(target error) bool { return target == errors.ErrUnsupported }

// ErrBadPath says a path cannot be layered as named: not a clean absolute
// path, not a directory, or through a symlink.
var ErrBadPath = errors.New("cannot be layered")

// ErrPathChanged says a layered path is no longer the directory its
// layer was made of: it, or a directory above it, was moved or replaced
// (by a symlink, say), or its owner or group changed. A diff or commit
// there would read or write another directory as root.
var ErrPathChanged = errors.New("the layered path is not the directory the layer was made of")

// ErrNotOwner says a layered path is not the session owner's, where
// only its own may be layered (Sandbox.OwnPathsOnly), or that a file
// whose mode a commit would change is not the layered path owner's.
var ErrNotOwner = errors.New("owned by another uid")

// ErrUnmappable says the layered path's owner could not be shown to the
// sandbox as its own (see IDMap); it comes wrapped with ErrUnsupported.
var ErrUnmappable = errors.New("the path's owner cannot be mapped to the sandbox's uid")

// ErrOwnerMayNot says a commit stopped at a change the layered path's
// owner could not have made itself, which it writes with the owner's ids.
var ErrOwnerMayNot = errors.New("the path's owner may not make this change")

// ErrStale says a layer's record lacks what a diff or commit needs, as
// an earlier daemon made it.
var ErrStale = errors.New("the layer was made by an earlier daemon")

// ErrNotFound says a session has no layers.
var ErrNotFound = errors.New("no layer")

// ErrBusy says a layer is in use: its session runs on it, or another
// layer was started on it.
var ErrBusy = errors.New("layer in use")

// ConflictError refuses a commit: the listed files, which the layer
// changes, changed on the host since the layer was made.
type ConflictError struct {
	Path  string
	Files []string
}

func (e *ConflictError) Error() string {
	const most = 20
	files := e.Files
	more := ""
	if len(files) > most {
		more = fmt.Sprintf(" and %d more", len(files)-most)
		files = files[:most]
	}
	return fmt.Sprintf("%s changed on the host since the layer was made, in files the layer changes too: %s%s; review them, then commit with force to overwrite them", e.Path, strings.Join(files, ", "), more)
}

// PartialError is a commit that stopped while applying a layer's
// changes: those in Applied are on the host, the others are not, but for
// Partly, when set: the change it stopped in, which removes a directory
// and may have removed some of what it held; and for a directory the
// commit made whose mode it had not yet set, which is on the host with
// its owner's writing and searching added (not told applied, a diff shows
// its mode as a change left). The layer is kept (a diff shows what is
// left).
type PartialError struct {
	Path    string
	Applied []Change
	Partly  *Change
	Err     error
}

func (e *PartialError) Error() string {
	partly := ""
	if e.Partly != nil {
		partly = fmt.Sprintf(" (but for %s %s, which may have removed part of what it held)", e.Partly.Kind, e.Partly.Path)
	}
	if len(e.Applied) == 0 {
		return fmt.Sprintf("%v; nothing else of the layer of %s was applied%s", e.Err, e.Path, partly)
	}
	const most = 20
	var names []string
	for _, c := range e.Applied[:min(len(e.Applied), most)] {
		names = append(names, c.Kind.String()+" "+c.Path)
	}
	more := ""
	if len(e.Applied) > most {
		more = fmt.Sprintf(" and %d more", len(e.Applied)-most)
	}
	return fmt.Sprintf("%v; of the layer of %s, %d changes were applied before (%s%s), the others were not%s; the layer is kept: diff shows what is left", e.Err, e.Path, len(e.Applied), strings.Join(names, ", "), more, partly)
}

func (e *PartialError) Unwrap() error { return e.Err }

// fileType names the type of mode m as Change.Type does.
func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
