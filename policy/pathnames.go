package policy

import "strings"

// Names are the rules by which one OS spells and compares the paths of a
// policy: the separator between components, and how two spellings of a
// name are made comparable. Every question of containment (is a carve-out
// inside a write root, which mount covers a path) is answered here, with
// the rules of the OS whose paths they are, whatever OS the code runs on:
// a planner for Windows tested on Linux must compare as Windows does.
type Names struct {
	// Sep separates components.
	Sep byte
	// Fold, if set, maps a name to the form in which two spellings of
	// one file are equal.
	Fold func(string) string
}

var (
	// Unix are the rules of Linux and macOS: "/" between names compared
	// byte for byte, as the kernel and Seatbelt match them.
	Unix = Names{Sep: '/'}
	// Windows are the rules of NTFS, SMB and the environment block: "\"
	// between names that are upcased before they are compared.
	// strings.EqualFold, or lower-casing, would take names NTFS keeps
	// apart for one (i and İ, k and the Kelvin sign), and a carve-out
	// merged into another would go unenforced.
	Windows = Names{Sep: '\\', Fold: strings.ToUpper}
)

// NamesOf are the rules of the OS that spells path p: Windows for a drive
// (C:) or UNC (\\server\share) path, Unix otherwise.
func NamesOf(p string) Names {
	if len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z') || strings.HasPrefix(p, `\\`) {
		return Windows
	}
	return Unix
}

func (n Names) fold(s string) string {
	if n.Fold == nil {
		return s
	}
	return n.Fold(s)
}

// Same reports whether the clean paths a and b name the same file.
func (n Names) Same(a, b string) bool { return n.fold(a) == n.fold(b) }

// Within reports whether the clean path p is root itself or lies below it.
// The comparison is on whole components, so "/a-b" is not within "/a". A
// clean root ends in the separator only when it is a volume's root ("/",
// `C:\`).
func (n Names) Within(p, root string) bool {
	fp, fr := n.fold(p), n.fold(root)
	if !strings.HasPrefix(fp, fr) {
		return false
	}
	// Looking at the byte after the prefix, rather than appending the
	// separator to root, spares the daemon an allocation for each of the
	// many comparisons it makes planning a launch.
	return len(fp) == len(fr) || fr != "" && fr[len(fr)-1] == n.Sep || fp[len(fr)] == n.Sep
}

// WithinAny returns the index of the first of roots that p lies within,
// or -1.
func (n Names) WithinAny(p string, roots []string) int {
	for i, r := range roots {
		if n.Within(p, r) {
			return i
		}
	}
	return -1
}

// Innermost returns the entry of roots that p lies within and that lies
// within every other such entry: the deepest, whose rule decides for p.
// It is "" when p lies within none.
func (n Names) Innermost(p string, roots []string) string { return n.nearest(p, roots, true) }

// Outermost returns the entry of roots that p lies within and that no
// other such entry contains, or "" when p lies within none.
func (n Names) Outermost(p string, roots []string) string { return n.nearest(p, roots, false) }

// nearest is Innermost (inner) or Outermost: the roots that contain p
// are nested, so one of them is the deepest and one the shallowest.
func (n Names) nearest(p string, roots []string, inner bool) string {
	best := ""
	for _, r := range roots {
		if !n.Within(p, r) {
			continue
		}
		if best == "" || inner && n.Within(r, best) || !inner && n.Within(best, r) {
			best = r
		}
	}
	return best
}
