package policy

import (
	"path/filepath"
	"slices"
)

// within reports whether the clean path p is root itself or lies below
// it, by the rules of the OS that spells root.
func within(p, root string) bool { return NamesOf(root).Within(p, root) }

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
