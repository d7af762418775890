package launcherwindows

import (
	"regexp"
	"testing"
)

var derivedShape = regexp.MustCompile(`^S-1-15-3-1024(-(0|[1-9][0-9]*)){8}$`)

func TestDeriveSID(t *testing.T) {
	// Worked out apart from this package: SHA-256 of the name as eight
	// little-endian uint32.
	for name, want := range map[string]string{
		"sandboxd-network:none": "S-1-15-3-1024-2590905653-2477285395-2143033006-376668613-2554066343-1896568758-1107299686-885263978",
		"":                      "S-1-15-3-1024-1120186595-337443992-3371498394-616132505-3829509671-1284741988-463050148-1438143096",
	} {
		if got := DeriveSID(name); got != want {
			t.Errorf("DeriveSID(%q) = %s, want %s", name, got, want)
		}
	}
	if DeriveSID("sandboxd-network:none") != NetworkNoneSID {
		t.Errorf("NetworkNoneSID is not DeriveSID(\"sandboxd-network:none\")")
	}
	seen := map[string]string{}
	for _, s := range []string{
		WriteRootSID(`C:\work\repo`), WriteRootSID(`C:\work\other`), SessionSID("s1"), SessionSID("s2"),
		WriteRootSID(`C:\work\repo2`), DeriveSID("x"), NetworkNoneSID,
	} {
		if !derivedShape.MatchString(s) {
			t.Errorf("%s has not the shape of a derived SID", s)
		}
		if prev, ok := seen[s]; ok {
			t.Errorf("%s derived twice (%s)", s, prev)
		}
		seen[s] = s
	}
}

func TestPathSIDsIgnoreSpelling(t *testing.T) {
	same := []string{`C:\Work\Repo`, `c:\work\repo`, `C:/work/repo/`, `C:\work\.\x\..\repo`, `c:\\work\\repo`}
	for _, p := range same[1:] {
		if WriteRootSID(p) != WriteRootSID(same[0]) {
			t.Errorf("%q and %q get different SIDs", p, same[0])
		}
		if pathKey(p) != `C:\WORK\REPO` {
			t.Errorf("pathKey(%q) = %q", p, pathKey(p))
		}
	}
	// NTFS upcases names to compare them: İ is not i, the Kelvin sign is
	// not k, though lower-casing would merge them.
	if WriteRootSID(`C:\İ`) == WriteRootSID(`C:\i`) || WriteRootSID("C:\\\u212a") == WriteRootSID(`C:\k`) || WriteRootSID(`C:\ſ`) != WriteRootSID(`C:\S`) {
		t.Errorf("path SIDs do not compare names as NTFS does")
	}
	for _, p := range []string{`C:\work\repo2`, `D:\work\repo`, `C:\work\repo\.git`, `\\server\share\work\repo`} {
		if WriteRootSID(p) == WriteRootSID(same[0]) {
			t.Errorf("%q and %q get the same SID", p, same[0])
		}
	}
}

func TestIsSID(t *testing.T) {
	for s, want := range map[string]bool{
		"S-1-5-21-1-2-3-1001":  true,
		"S-1-5-18":             true,
		NetworkNoneSID:         true,
		"S-1-5":                false,
		"S-1-5-":               false,
		"s-1-5-18":             false,
		"S-1-5-x":              false,
		"S-1-5-18)(A;;GA;;;WD": false,
		"":                     false,
		"LOGON":                false,
		"S-1-5--18":            false,
		"S-1-5-+18":            false,
	} {
		if got := isSID(s); got != want {
			t.Errorf("isSID(%q) = %v, want %v", s, got, want)
		}
	}
}
