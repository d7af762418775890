package launcherwindows

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/policy"
)

// Policy paths are Windows paths whatever OS plans them, so path/filepath
// (the host's) is of no use here: these helpers take `\` and `/` as
// separators and compare case-insensitively, as NTFS and SMB do.

// splitVolume returns the volume of p ("C:" or `\\server\share`) and the
// rest, with every separator already a backslash. A p without a volume
// returns "" and p.
func splitVolume(p string) (vol, rest string) {
	if len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0]) {
		return strings.ToUpper(p[:1]) + ":", p[2:]
	}
	if !strings.HasPrefix(p, `\\`) {
		return "", p
	}
	server, after, _ := strings.Cut(p[2:], `\`)
	share, after, found := strings.Cut(after, `\`)
	if found {
		after = `\` + after
	}
	return `\\` + server + `\` + share, after
}

func isASCIILetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// cleanPath is p with `/` turned into `\`, empty and "." components
// dropped and ".." resolved lexically (never above the volume root), the
// way Win32 normalizes a full path. A volume root keeps its trailing
// backslash: `C:\`, `\\server\share\`.
func cleanPath(p string) string {
	vol, rest := splitVolume(strings.ReplaceAll(p, "/", `\`))
	var parts []string
	for c := range strings.SplitSeq(rest, `\`) {
		switch c {
		case "", ".":
		case "..":
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		default:
			parts = append(parts, c)
		}
	}
	return vol + `\` + strings.Join(parts, `\`)
}

// pathKey is how two spellings of one path compare equal.
func pathKey(p string) string {
	return fold(cleanPath(p))
}

// fold is a name as Windows compares it (policy.Windows).
var fold = policy.Windows.Fold

// checkPath returns why p cannot name a policy path on Windows, or "".
// Whatever Win32 would silently rewrite (trailing dots and spaces, device
// names, alternate data streams, the \\?\ and \\.\ namespaces) is refused:
// the plan reasons about the path as spelled, so the object it reaches
// must be the one spelled.
func checkPath(p string) string {
	switch {
	case p == "":
		return "an empty path"
	case !utf8.ValidString(p):
		return fmt.Sprintf("%q, which is not valid UTF-8", p)
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 }):
		return fmt.Sprintf("%q, which contains a control character", p)
	}
	s := strings.ReplaceAll(p, "/", `\`)
	vol, rest := splitVolume(s)
	var names []string
	switch {
	case vol == "" && strings.HasPrefix(s, `\`):
		return fmt.Sprintf("%q, which names no drive (it would be relative to the daemon's current drive)", p)
	case vol == "":
		return fmt.Sprintf("%q, which is not absolute", p)
	case strings.HasPrefix(vol, `\\`):
		server, share, _ := strings.Cut(vol[2:], `\`)
		if server == "?" || server == "." {
			return fmt.Sprintf("%q, a device namespace path", p)
		}
		if server == "" || share == "" {
			return fmt.Sprintf("%q, a UNC path without both a server and a share", p)
		}
		names = append(names, server, share)
	case !strings.HasPrefix(rest, `\`):
		return fmt.Sprintf("%q, which is relative to the current directory of drive %s", p, vol)
	}
	for c := range strings.SplitSeq(rest, `\`) {
		if c != "." && c != ".." {
			names = append(names, c)
		}
	}
	for _, n := range names {
		if why := checkName(n); why != "" {
			return fmt.Sprintf("%q, whose component %q %s", p, n, why)
		}
	}
	return ""
}

// reservedNames are the DOS device names Win32 resolves to a device in
// any directory and with any extension.
var reservedNames = map[string]bool{
	"con": true, "prn": true, "aux": true, "nul": true, "conin$": true, "conout$": true,
	"com0": true, "com1": true, "com2": true, "com3": true, "com4": true, "com5": true, "com6": true, "com7": true, "com8": true, "com9": true,
	"com¹": true, "com²": true, "com³": true,
	"lpt0": true, "lpt1": true, "lpt2": true, "lpt3": true, "lpt4": true, "lpt5": true, "lpt6": true, "lpt7": true, "lpt8": true, "lpt9": true,
	"lpt¹": true, "lpt²": true, "lpt³": true,
}

func checkName(n string) string {
	if n == "" {
		return ""
	}
	if i := strings.IndexAny(n, `<>:"|?*`); i >= 0 {
		return fmt.Sprintf("contains %q, which Windows does not allow in a name", n[i:i+1])
	}
	if strings.HasSuffix(n, ".") || strings.HasSuffix(n, " ") {
		return "ends in a dot or a space, which Windows drops"
	}
	base, _, _ := strings.Cut(n, ".")
	if reservedNames[strings.ToLower(strings.TrimRight(base, " "))] {
		return "is a DOS device name"
	}
	return ""
}

// samePath, within and outermost are policy's path algebra, with the
// rules of Windows paths: samePath reports whether two clean paths name
// the same file, within whether the clean path p is root or lies below it
// (on whole components and regardless of case), and outermost which entry
// of roots that p lies within no other such entry contains ("" if none).
var (
	samePath  = policy.Windows.Same
	within    = policy.Windows.Within
	outermost = policy.Windows.Outermost
)

// isVolumeRoot reports whether the clean path p is the root of a volume.
func isVolumeRoot(p string) bool {
	_, rest := splitVolume(p)
	return rest == `\` || rest == ""
}

// parent is the directory above the clean path p; a volume root is its
// own parent.
func parent(p string) string {
	vol, rest := splitVolume(p)
	i := strings.LastIndex(rest, `\`)
	if i <= 0 {
		return vol + `\`
	}
	return vol + rest[:i]
}

// ancestorsBetween returns the directories strictly between root and the
// clean path p, outermost first, spelled as p spells them. It returns
// none when root is "" or p is not strictly below it.
func ancestorsBetween(root, p string) []string {
	if root == "" || !within(p, root) {
		return nil
	}
	var out []string
	for d := parent(p); d != p && within(d, root) && !samePath(d, root); p, d = d, parent(d) {
		out = append(out, d)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
