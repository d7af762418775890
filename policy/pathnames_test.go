package policy

import "testing"

// The rules are the OS's whose paths they are, not the build's: each case
// runs on every OS.
func TestNamesWithin(t *testing.T) {
	for _, c := range []struct {
		n       Names
		p, root string
		want    bool
	}{
		{Unix, "/a", "/a", true},
		{Unix, "/a/b", "/a", true},
		{Unix, "/a-b", "/a", false},
		{Unix, "/ab", "/a", false},
		{Unix, "/a", "/a/b", false},
		{Unix, "/a", "/", true},
		{Unix, "/", "/", true},
		{Unix, "/A/b", "/a", false},
		{Windows, `C:\Work\.git`, `c:\work`, true},
		{Windows, `C:\Work-2`, `C:\Work`, false},
		{Windows, `C:\Work`, `C:\`, true},
		{Windows, `D:\Work`, `C:\`, false},
		{Windows, `\\srv\share\x`, `\\SRV\Share`, true},
		// NTFS upcases: the Kelvin sign and k stay apart, as do dotless ı
		// and i under EqualFold's rules but not NTFS's.
		{Windows, "C:\\\u212a\\x", `C:\k`, false},
		{Windows, `C:\w\i\x`, `C:\W\I`, true},
	} {
		if got := c.n.Within(c.p, c.root); got != c.want {
			t.Errorf("Within(%q, %q) with sep %q = %v, want %v", c.p, c.root, c.n.Sep, got, c.want)
		}
	}
}

func TestNamesInnermostOutermost(t *testing.T) {
	roots := []string{"/w/a", "/w", "/w/a/b", "/x"}
	if got := Unix.Innermost("/w/a/b/c", roots); got != "/w/a/b" {
		t.Errorf("Innermost = %q", got)
	}
	if got := Unix.Outermost("/w/a/b/c", roots); got != "/w" {
		t.Errorf("Outermost = %q", got)
	}
	if got := Unix.Innermost("/y", roots); got != "" {
		t.Errorf("Innermost outside every root = %q", got)
	}
	if got := Unix.WithinAny("/x/1", roots); got != 3 {
		t.Errorf("WithinAny = %d", got)
	}
	if got := Windows.Innermost(`c:\W\A\z`, []string{`C:\w`, `C:\w\a`}); got != `C:\w\a` {
		t.Errorf("Windows Innermost = %q", got)
	}
}

func TestNamesOf(t *testing.T) {
	for p, want := range map[string]byte{"/a": '/', `C:\a`: '\\', `c:\`: '\\', `\\srv\share`: '\\', "a": '/', "1:": '/'} {
		if got := NamesOf(p).Sep; got != want {
			t.Errorf("NamesOf(%q).Sep = %q, want %q", p, got, want)
		}
	}
}
