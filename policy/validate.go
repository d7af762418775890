package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// maxPort is the largest TCP/UDP port.
const maxPort = 65535

// Validate checks that p means something enforceable and unambiguous. Every
// error is a *FieldError naming the first offending field. A nil policy is
// the default policy and is valid.
//
// Paths must be non-empty, valid UTF-8 without NUL bytes, and absolute; ".."
// components are allowed and cleaned away. read_only entries must lie within
// a write root, and no write root may lie within a read_only or deny entry
// (it could never be writable, so asking for it is a mistake worth
// reporting). filesystem.layer entries follow the rules of write roots, may
// not be "/", lie within one another or be a write root, and exclude
// children.allow: a child sandbox would see the host's path, not the
// layer. read_roots need read LISTED; network.allow needs mode
// ALLOWLIST; enum values must be known ones; the timeout must be a valid,
// non-negative duration.
//
// A network.allow host is an IP literal (no brackets, no IPv6 zone), a DNS
// name of letters, digits, '-' and '_', or "*." and a name of at least two
// labels: "*.example.org", never "*.org" or "*". Names may end in one dot
// (which Normalize drops), must not have empty labels, labels above 63 or
// names above 253 characters, and must not end in a numeric label ("127.1",
// "*.0.0.1"), which resolvers read as an address. Errors name the host and
// say what to write instead.
func Validate(p *sandboxdv1.Policy) error {
	if err := validateFilesystem(p.GetFilesystem()); err != nil {
		return err
	}
	if len(p.GetFilesystem().GetLayer()) > 0 && p.GetChildren().GetAllow() {
		return &FieldError{Field: "filesystem.layer", Msg: "set together with children.allow; a child sandbox would see the host's path instead of the layer, so ask for one or the other"}
	}
	if err := validateNetwork(p.GetNetwork()); err != nil {
		return err
	}
	return validateLimits(p.GetLimits())
}

func validateFilesystem(fs *sandboxdv1.Filesystem) error {
	if _, ok := sandboxdv1.Filesystem_Read_name[int32(fs.GetRead())]; !ok {
		return &FieldError{Field: "filesystem.read", Msg: fmt.Sprintf("unknown value %d", fs.GetRead())}
	}
	lists := []struct {
		field string
		paths []string
	}{
		{"filesystem.read_roots", fs.GetReadRoots()},
		{"filesystem.write", fs.GetWrite()},
		{"filesystem.read_only", fs.GetReadOnly()},
		{"filesystem.deny", fs.GetDeny()},
		{"filesystem.layer", fs.GetLayer()},
	}
	cleaned := make([][]string, len(lists))
	for i, l := range lists {
		for j, p := range l.paths {
			if msg := checkPath(p); msg != "" {
				return &FieldError{Field: fmt.Sprintf("%s[%d]", l.field, j), Msg: msg}
			}
			cleaned[i] = append(cleaned[i], filepath.Clean(p))
		}
	}
	readRoots, write, readOnly, deny, layer := cleaned[0], cleaned[1], cleaned[2], cleaned[3], cleaned[4]

	if len(readRoots) > 0 && fs.GetRead() != sandboxdv1.Filesystem_LISTED {
		return &FieldError{Field: "filesystem.read_roots", Msg: fmt.Sprintf("set, but filesystem.read is %v, not LISTED; everything is readable already", readName(fs.GetRead()))}
	}
	for i, w := range write {
		if j := withinAny(w, readOnly); j >= 0 {
			return &FieldError{Field: fmt.Sprintf("filesystem.write[%d]", i), Msg: fmt.Sprintf("%q lies within filesystem.read_only[%d] %q and could never be written", fs.GetWrite()[i], j, fs.GetReadOnly()[j])}
		}
		if j := withinAny(w, deny); j >= 0 {
			return &FieldError{Field: fmt.Sprintf("filesystem.write[%d]", i), Msg: fmt.Sprintf("%q lies within filesystem.deny[%d] %q and could never be written", fs.GetWrite()[i], j, fs.GetDeny()[j])}
		}
	}
	for i, l := range layer {
		field := fmt.Sprintf("filesystem.layer[%d]", i)
		switch {
		case l == "/":
			return &FieldError{Field: field, Msg: "\"/\": a layer holds one workspace, not the whole tree; name the workspace's directory"}
		case withinAny(l, readOnly) >= 0:
			return &FieldError{Field: field, Msg: fmt.Sprintf("%q lies within filesystem.read_only[%d] %q and could never be written", fs.GetLayer()[i], withinAny(l, readOnly), fs.GetReadOnly()[withinAny(l, readOnly)])}
		case withinAny(l, deny) >= 0:
			return &FieldError{Field: field, Msg: fmt.Sprintf("%q lies within filesystem.deny[%d] %q and could never be written", fs.GetLayer()[i], withinAny(l, deny), fs.GetDeny()[withinAny(l, deny)])}
		case slices.Contains(write, l):
			return &FieldError{Field: field, Msg: fmt.Sprintf("%q is also a filesystem.write root; a path is either written through or layered", fs.GetLayer()[i])}
		}
		for j, o := range layer {
			if j != i && o != l && within(l, o) {
				return &FieldError{Field: field, Msg: fmt.Sprintf("%q lies within filesystem.layer[%d] %q; one layer already holds its changes", fs.GetLayer()[i], j, fs.GetLayer()[j])}
			}
		}
	}
	for i, r := range readOnly {
		if withinAny(r, write) < 0 && withinAny(r, layer) < 0 {
			return &FieldError{Field: fmt.Sprintf("filesystem.read_only[%d]", i), Msg: fmt.Sprintf("%q is not within any filesystem.write root or filesystem.layer; a read-only carve-out only makes sense inside one", fs.GetReadOnly()[i])}
		}
	}
	return nil
}

// checkPath returns why p is not a usable policy path, or "".
func checkPath(p string) string {
	switch {
	case p == "":
		return "path is empty"
	case !utf8.ValidString(p):
		return fmt.Sprintf("%q is not valid UTF-8", p)
	case strings.ContainsRune(p, 0):
		// The kernel would see the path cut at the NUL, a different path
		// from the one that was validated.
		return fmt.Sprintf("%q contains a NUL byte", p)
	case !filepath.IsAbs(p):
		return fmt.Sprintf("%q is not absolute", p)
	}
	return ""
}

func validateNetwork(n *sandboxdv1.Network) error {
	if _, ok := sandboxdv1.Network_Mode_name[int32(n.GetMode())]; !ok {
		return &FieldError{Field: "network.mode", Msg: fmt.Sprintf("unknown value %d", n.GetMode())}
	}
	if len(n.GetAllow()) > 0 && n.GetMode() != sandboxdv1.Network_ALLOWLIST {
		return &FieldError{Field: "network.allow", Msg: fmt.Sprintf("set, but network.mode is %v, not ALLOWLIST", modeName(n.GetMode()))}
	}
	for i, a := range n.GetAllow() {
		if msg := checkHost(a.GetHost()); msg != "" {
			return &FieldError{Field: fmt.Sprintf("network.allow[%d].host", i), Msg: msg}
		}
		if a.GetPort() > maxPort {
			return &FieldError{Field: fmt.Sprintf("network.allow[%d].port", i), Msg: fmt.Sprintf("%d is above %d", a.GetPort(), maxPort)}
		}
	}
	return nil
}

func validateLimits(l *sandboxdv1.Limits) error {
	t := l.GetTimeout()
	if t == nil {
		return nil
	}
	if err := t.CheckValid(); err != nil {
		return &FieldError{Field: "limits.timeout", Msg: err.Error()}
	}
	if t.GetSeconds() < 0 || t.GetNanos() < 0 {
		return &FieldError{Field: "limits.timeout", Msg: fmt.Sprintf("%v is negative", t.AsDuration())}
	}
	return nil
}

// readName and modeName name enum values the way a policy file spells them,
// including what an unspecified value means.
func readName(r sandboxdv1.Filesystem_Read) string {
	if r == sandboxdv1.Filesystem_READ_UNSPECIFIED {
		return "unspecified (ALL)"
	}
	return r.String()
}

func modeName(m sandboxdv1.Network_Mode) string {
	if m == sandboxdv1.Network_MODE_UNSPECIFIED {
		return "unspecified (NONE)"
	}
	return m.String()
}
