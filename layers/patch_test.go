package layers

import (
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	for _, c := range []struct {
		name               string
		old, new           string
		oldThere, newThere bool
		want               []string
	}{
		{"edit", "a\nb\nc\n", "a\nB\nc\n", true, true, []string{"--- a/f\n", "+++ b/f\n", "-b\n", "+B\n", " a\n"}},
		{"added", "", "x\n", false, true, []string{"--- /dev/null\n", "+++ b/f\n", "+x\n"}},
		{"deleted", "x\n", "", true, false, []string{"--- a/f\n", "+++ /dev/null\n", "-x\n"}},
		{"no final newline", "a", "a\nb", true, true, []string{"+b\n"}},
		{"binary", "a\x00", "b", true, true, []string{"Binary files a/f and b/f differ\n"}},
	} {
		got := unified("f", []byte(c.old), []byte(c.new), c.oldThere, c.newThere)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: patch lacks %q:\n%s", c.name, w, got)
			}
		}
	}
	if got := unified("f", []byte(strings.Repeat("x", maxPatchFile+1)), nil, true, false); !strings.HasPrefix(got, "Binary files") {
		t.Errorf("a file above maxPatchFile is shown line by line: %.80q", got)
	}
}

func TestConflictErrorNamesFiles(t *testing.T) {
	files := make([]string, 25)
	for i := range files {
		files[i] = "f" + string(rune('a'+i))
	}
	msg := (&ConflictError{Path: "/w", Files: files}).Error()
	for _, want := range []string{"/w changed on the host", "fa, fb", "and 5 more", "force"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}
