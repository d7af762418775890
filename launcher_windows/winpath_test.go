package launcherwindows

import (
	"slices"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		`C:\work\repo`:                `C:\work\repo`,
		`c:/work//repo/`:              `C:\work\repo`,
		`C:\work\.\x\..\repo`:         `C:\work\repo`,
		`C:\..\..\x`:                  `C:\x`,
		`C:\`:                         `C:\`,
		`C:/`:                         `C:\`,
		`\\server\share`:              `\\server\share\`,
		`//server/share/x/../y/`:      `\\server\share\y`,
		`\\server\share\..\..\etc`:    `\\server\share\etc`,
		`\\Server\Share\Dir\File.txt`: `\\Server\Share\Dir\File.txt`,
	} {
		if got := cleanPath(in); got != want {
			t.Errorf("cleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, ok := range []string{
		`C:\work\repo`, `c:/work/repo`, `C:\`, `\\server\share`, `\\server\share\x`, `C:\work\..\x`,
		`C:\a.b\c d\e...f`, `C:\conx\x`, `C:\console`, `D:\Ünïcode\目录`, `C:\x\nul1`,
	} {
		if why := checkPath(ok); why != "" {
			t.Errorf("checkPath(%q) = %q, want it accepted", ok, why)
		}
	}
	for bad, because := range map[string]string{
		``:               "empty",
		`work\repo`:      "not absolute",
		`\work\repo`:     "names no drive",
		`C:work`:         "relative to the current directory",
		`C:`:             "relative to the current directory",
		`\\?\C:\x`:       "device namespace",
		`\\.\pipe\x`:     "device namespace",
		`\\server`:       "server and a share",
		`\\server\`:      "server and a share",
		`\\\share`:       "server and a share",
		`C:\x\file:ads`:  `":"`,
		`C:\x\a*b`:       `"*"`,
		`C:\x\trailing.`: "dot or a space",
		`C:\x\trailing `: "dot or a space",
		`C:\x. \y`:       "dot or a space",
		`C:\x\NUL`:       "DOS device",
		`C:\x\con.txt`:   "DOS device",
		`C:\x\COM1`:      "DOS device",
		`C:\x\lpt¹.log`:  "DOS device",
		`C:\x\CONIN$`:    "DOS device",
		"C:\\x\ny":       "control character",
		"C:\\x\xff":      "UTF-8",
		"C:\\x\x00":      "control character",
	} {
		why := checkPath(bad)
		if !strings.Contains(why, because) {
			t.Errorf("checkPath(%q) = %q, want a reason mentioning %q", bad, why, because)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, root string
		want    bool
	}{
		{`C:\work\repo`, `C:\work\repo`, true},
		{`C:\work\repo\x`, `c:\WORK\Repo`, true},
		{`C:\work\repo-x`, `C:\work\repo`, false},
		{`C:\work`, `C:\work\repo`, false},
		{`C:\x`, `C:\`, true},
		{`D:\x`, `C:\`, false},
		{`\\s\share\x`, `\\S\SHARE`, true},
		{`\\s\share2\x`, `\\s\share`, false},
		{`\\s\share\x`, `\\S\SHARE\`, true},
	} {
		if got := within(c.p, c.root); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.p, c.root, got, c.want)
		}
	}
}

func TestAncestorsBetween(t *testing.T) {
	for _, c := range []struct {
		root, p string
		want    []string
	}{
		{`C:\w`, `C:\w\a\b\c`, []string{`C:\w\a`, `C:\w\a\b`}},
		{`c:\W`, `C:\w\A\b`, []string{`C:\w\A`}},
		{`C:\w`, `C:\w\a`, nil},
		{`C:\w`, `C:\w`, nil},
		{``, `C:\w\a\b`, nil},
		{`C:\w`, `C:\other\a\b`, nil},
		{`\\s\sh\w`, `\\s\sh\w\a\b`, []string{`\\s\sh\w\a`}},
	} {
		if got := ancestorsBetween(c.root, c.p); !slices.Equal(got, c.want) {
			t.Errorf("ancestorsBetween(%q, %q) = %q, want %q", c.root, c.p, got, c.want)
		}
	}
	if got := outermost(`C:\a\b\c`, []string{`C:\a\b`, `C:\x`, `c:\A`}); got != `c:\A` {
		t.Errorf("outermost = %q", got)
	}
	if got := parent(`C:\`); got != `C:\` {
		t.Errorf("parent(C:\\) = %q", got)
	}
}
