package conformance

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestChildInheritsWhatItLeavesOut: a child that names only a deny path or
// only a read-only carve-out keeps its parent's write roots, and what it
// names still holds (issue 21).
func TestChildInheritsWhatItLeavesOut(t *testing.T) {
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			work := f.mkdir("work")
			f.file("work/secret/key", "secret\n")
			f.mkdir("work/.git")
			script := fmt.Sprintf(`ctl=%[1]s; probe=%[2]s; w=%[3]s
echo "== deny-only"; $ctl run --deny $w/secret -- $probe write $w/a read $w/secret/key 2>&1; echo "rc=$?"
echo "== read-only-only"; $ctl run --read-only $w/.git -- $probe write $w/b write $w/.git/c 2>&1; echo "rc=$?"
echo "== end"
`, suite.sandboxctl, suite.probe, work)
			s := run(t, commandStart(path == "pty", supervisorPolicy(work), nil, "/bin/sh", "-c", script), nil)
			if childrenRefused(t, s.err) {
				return
			}
			exitedCleanly(t, s)
			sec := sections(s.stdout + s.stderr)
			if _, ok := sec["end"]; !ok {
				t.Fatalf("the supervisor script did not finish:\n%s", s)
			}
			for name, steps := range map[string][]step{
				"deny-only":      {allow("write", work+"/a"), deny("read", work+"/secret/key")},
				"read-only-only": {allow("write", work+"/b"), deny("write", work+"/.git/c")},
			} {
				if rc := rcOf(sec[name]); rc != 0 {
					t.Errorf("%s: the child was not started (exit %d): %q", name, rc, sec[name])
					continue
				}
				checkSteps(t, steps, parseOutcomes(sec[name]), sec[name])
			}
			unchanged(t, filepath.Join(work, "a"), payload)
			unchanged(t, filepath.Join(work, "b"), payload)
			absent(t, filepath.Join(work, ".git", "c"))
		})
	}
}
