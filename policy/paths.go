package policy

import (
	"path/filepath"
	"slices"
	"strings"
)

// within reports whether path p is root itself or lies below it. Both must
// be clean. The comparison is on whole components, so "/a-b" is not within
// "/a", and ignores case where the host's file systems do (Windows).
func within(p, root string) bool {
	if len(p) < len(root) || !sameNames(p[:len(root)], root) {
		return false
	}
	if len(p) == len(root) {
		return true
	}
	// A clean path ends in a separator only when it is a root such as "/".
	return strings.HasSuffix(root, string(filepath.Separator)) || p[len(root)] == filepath.Separator
}

// withinAny returns the index of the first root that p lies within, or -1.
func withinAny(p string, roots []string) int {
	for i, r := range roots {
		if within(p, r) {
			return i
		}
	}
	return -1
}

// cleanPaths returns the paths cleaned, sorted and deduplicated, without
// those that lie within another entry: under the semantics of this package
// a nested entry of the same list never changes what is allowed.
func cleanPaths(paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, filepath.Clean(p))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(slices.Clone(out), func(p string) bool {
		return slices.ContainsFunc(out, func(r string) bool { return r != p && within(p, r) })
	})
}
