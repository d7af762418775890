package layers

import (
	"bytes"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// maxPatchFile is the largest file a patch shows the lines of; beyond it,
// or for a file with a NUL byte, the patch says the files differ.
const maxPatchFile = 1 << 20

// isText guesses, as diff(1) and git do, that a file with no NUL byte in
// its first 8000 bytes is text.
func isText(b []byte) bool {
	return !bytes.Contains(b[:min(len(b), 8000)], []byte{0})
}

// unified is the unified diff of one file's old and new content; nil
// content stands for a file that is not there.
func unified(path string, old, new []byte, oldThere, newThere bool) string {
	from, to := "a/"+path, "b/"+path
	if !oldThere {
		from = "/dev/null"
	}
	if !newThere {
		to = "/dev/null"
	}
	if len(old) > maxPatchFile || len(new) > maxPatchFile || !isText(old) || !isText(new) {
		return "Binary files " + from + " and " + to + " differ\n"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(old), B: lines(new),
		FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		return "Files " + from + " and " + to + " differ\n"
	}
	return text
}

// lines splits b after each newline; a last line without one gets one, so
// the patch stays line-based (it does not mark the missing newline).
func lines(b []byte) []string {
	out := strings.SplitAfter(string(b), "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	} else {
		out[len(out)-1] += "\n"
	}
	return out
}
