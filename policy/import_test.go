package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/golden"
)

// importTestOptions are the caller every golden file was made for.
func importTestOptions(lossy bool) ImportOptions {
	return ImportOptions{Home: "/home/dev", Cwd: "/home/dev/project", TempDir: "/var/tmp/dev", Lossy: lossy}
}

// importResult renders what an importer returned the way the golden files
// hold it: the policy file, or the error, then a line per warning.
func importResult(p *sandboxdv1.Policy, warnings []*KeyError, err error) string {
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
		return b.String()
	}
	enc, encErr := Encode(p)
	if encErr != nil {
		return "encode: " + encErr.Error()
	}
	// Encode's whitespace varies from build to build; the golden files'
	// must not.
	var compact, indented bytes.Buffer
	if err := json.Compact(&compact, enc); err != nil {
		return "compact: " + err.Error()
	}
	if err := json.Indent(&indented, compact.Bytes(), "", "  "); err != nil {
		return "indent: " + err.Error()
	}
	b.Write(indented.Bytes())
	b.WriteString("\n")
	for _, w := range warnings {
		fmt.Fprintf(&b, "warning: %v\n", w)
	}
	return b.String()
}

// TestImportGolden imports every settings file under testdata/import and
// compares with its .golden file; a name with ".lossy." is imported with
// Lossy. go test -run TestImportGolden -update rewrites them.
func TestImportGolden(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the settings files name Unix paths")
	}
	files, err := filepath.Glob("testdata/import/*/*[a-z]")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range files {
		if strings.HasSuffix(in, ".golden") {
			continue
		}
		n++
		t.Run(in, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			opts := importTestOptions(strings.Contains(filepath.Base(in), ".lossy."))
			var got string
			if strings.HasSuffix(in, ".toml") {
				got = importResult(ImportCodex(data, "", opts))
			} else {
				got = importResult(ImportSRT(data, opts))
			}
			name, err := filepath.Rel("testdata", strings.TrimSuffix(in, filepath.Ext(in))+".golden")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, name, []byte(got))
		})
	}
	if n < 10 {
		t.Fatalf("found %d settings files under testdata/import, want at least 10", n)
	}
}

func TestImportCodexProfile(t *testing.T) {
	data, err := os.ReadFile("testdata/import/codex/profiles.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := ImportCodex(data, "yolo", importTestOptions(false))
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Preset("full-access", "")
	assertEqual(t, p, full)
	if _, _, err := ImportCodex(data, "missing", importTestOptions(false)); err == nil || err.Error() != "profiles.missing: no such profile" {
		t.Errorf("unknown profile: %v", err)
	}
}

func TestImportPaths(t *testing.T) {
	im := &importer{opts: ImportOptions{Home: "/h", Cwd: "/c"}}
	for in, want := range map[string]string{
		"~": "/h", "~/a/../b": "/h/b", "a/b": "/c/a/b", ".": "/c", "/x/./y/": "/x/y",
		"~other/x": "error", "": "error", "a\x00b": "error",
	} {
		got, err := im.path("k", in)
		if err != nil {
			got = "error"
			if !strings.HasPrefix(err.Error(), "k: ") {
				t.Errorf("path(%q): error %q does not name the key", in, err)
			}
		}
		if got != want {
			t.Errorf("path(%q) = %q, want %q", in, got, want)
		}
	}
	unknown := &importer{}
	if _, err := unknown.path("k", "~/x"); err == nil {
		t.Error("~ resolved without a home")
	}
	if _, err := unknown.path("k", "x"); err == nil {
		t.Error("relative path resolved without a current directory")
	}
}

// srtSeeds are settings the fuzzers start from, beyond the golden files.
var srtSeeds = []string{
	`{}`,
	`{"filesystem":{"allowWrite":["/w","/w/.git/x"],"denyWrite":["/w/a","/v"],"denyRead":["/w/b/*"]}}`,
	`{"filesystem":{"allowWrite":["/w/s"],"denyRead":["/w"]},"network":{"allowedDomains":["*.a.example","b.a.example"],"deniedDomains":["*"]}}`,
	`{"network":{"allowedDomains":["example.com:443","[::1]","10.0.0.1"]}}`,
	`{"filesystem":{"denyRead":["/home/a/*/../.ssh","~/*/../../b"]}}`,
}

// FuzzImportSRT checks that whatever the settings, an import either fails
// naming a key or gives a valid, normalized policy; that with Lossy it
// succeeds whenever the strict import does, with the same policy; and,
// independently of the importer's code, that the policy is never wider
// than the settings: every write root lies within a literal allowWrite
// path, every literal denyRead and denyWrite path stays unreadable or
// unwritable, and every allowed host is an allowedDomains entry.
func FuzzImportSRT(f *testing.F) {
	if runtime.GOOS == "windows" {
		f.Skip("the seeds name Unix paths")
	}
	for _, s := range srtSeeds {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/import/srt/*.json")
	for _, in := range files {
		if data, err := os.ReadFile(in); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, _, strictErr := ImportSRT(data, importTestOptions(false))
		p, _, err := ImportSRT(data, importTestOptions(true))
		if strictErr == nil {
			if err != nil {
				t.Fatalf("strict import succeeds, lossy fails: %v", err)
			}
			assertEqual(t, p, strict)
		}
		if err != nil {
			return
		}
		checkPolicy(t, p)
		s, ok := decodeSRT(data)
		if !ok {
			t.Fatalf("imported settings that do not decode as srt's shape: %q", data)
		}
		im := &importer{opts: importTestOptions(true)}
		resolve := func(l []string) (out []string) {
			for _, x := range l {
				if a, err := im.path("", x); err == nil && !isGlob(x) {
					out = append(out, a)
				}
			}
			return out
		}
		allowWrite := resolve(s.Filesystem.AllowWrite)
		for _, w := range p.GetFilesystem().GetWrite() {
			if withinAny(w, allowWrite) < 0 {
				t.Fatalf("write root %q is not within any literal allowWrite path %q", w, allowWrite)
			}
		}
		for _, d := range resolve(s.Filesystem.DenyRead) {
			if r, _ := access(p, d); r {
				t.Fatalf("denyRead path %q is readable", d)
			}
		}
		for _, d := range resolve(s.Filesystem.DenyWrite) {
			if _, w := access(p, d); w {
				t.Fatalf("denyWrite path %q is writable", d)
			}
		}
		for _, a := range p.GetNetwork().GetAllow() {
			if a.GetPort() != 0 || !slices.ContainsFunc(s.Network.AllowedDomains, func(d string) bool { return canonicalHost(d) == a.GetHost() }) {
				t.Fatalf("allowed host %v is not an allowedDomains entry %q", a, s.Network.AllowedDomains)
			}
			for _, d := range s.Network.DeniedDomains {
				if MatchHost(a.GetHost(), d) || MatchHost(d, a.GetHost()) {
					t.Fatalf("allowed host %v overlaps deniedDomains entry %q", a, d)
				}
			}
		}
	})
}

// FuzzImportCodex checks that whatever the config, an import either
// fails or gives a valid, normalized policy; that with Lossy it succeeds
// whenever the strict import does, with the same policy; and that only
// danger-full-access gives the host's network or write access to /.
func FuzzImportCodex(f *testing.F) {
	if runtime.GOOS == "windows" {
		f.Skip("the seeds name Unix paths")
	}
	f.Add([]byte(`sandbox_mode = "workspace-write"` + "\n[sandbox_workspace_write]\nwritable_roots = [\"/\"]\n"))
	files, _ := filepath.Glob("testdata/import/codex/*.toml")
	for _, in := range files {
		if data, err := os.ReadFile(in); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, _, strictErr := ImportCodex(data, "", importTestOptions(false))
		p, _, err := ImportCodex(data, "", importTestOptions(true))
		if strictErr == nil {
			if err != nil {
				t.Fatalf("strict import succeeds, lossy fails: %v", err)
			}
			assertEqual(t, p, strict)
		}
		if err != nil {
			return
		}
		checkPolicy(t, p)
		full := strings.Contains(string(data), "danger-full-access")
		if !full && p.GetNetwork().GetMode() == sandboxdv1.Network_HOST && !strings.Contains(string(data), "network_access") {
			t.Fatalf("host network without network_access or danger-full-access: %s", text(p))
		}
		if !full && slices.Contains(p.GetFilesystem().GetWrite(), "/") && !strings.Contains(string(data), "writable_roots") {
			t.Fatalf("/ writable without writable_roots or danger-full-access: %s", text(p))
		}
	})
}

// srtShape is the part of srt's settings the fuzzer's checks read.
type srtShape struct {
	Filesystem struct {
		AllowWrite, DenyWrite, DenyRead []string
	}
	Network struct {
		AllowedDomains, DeniedDomains []string
	}
}

func decodeSRT(data []byte) (srtShape, bool) {
	var s srtShape
	return s, json.Unmarshal(data, &s) == nil
}

func TestImportCodexRejects(t *testing.T) {
	for in, want := range map[string]string{
		`default_permissions = 1`:       "default_permissions: want the name of a permission profile",
		`default_permissions = ":yolo"`: `permissions.:yolo: a custom permission profile`,
		`sandbox_mode = "yolo"`:         `sandbox_mode: "yolo": want read-only`,
		`sandbox_mode = true`:           "sandbox_mode: want read-only",
		`profile = 3`:                   "profile: want the name",
		"sandbox_mode = \"workspace-write\"\nsandbox_workspace_write = 1":                              "sandbox_workspace_write: want a table",
		"sandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nwritable_roots = [1]":          "sandbox_workspace_write.writable_roots[0]: want a path",
		"sandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nnetwork_access = \"yes\"":      "sandbox_workspace_write.network_access: want true or false",
		"sandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nwritable_roots = [\"~bob/x\"]": `writable_roots[0]: "~bob/x" names another user's home`,
		"sandbox_mode = [": "codex config",
	} {
		_, _, err := ImportCodex([]byte(in), "", importTestOptions(true))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ImportCodex(%q): %v, want an error containing %q", in, err, want)
		}
	}
}
