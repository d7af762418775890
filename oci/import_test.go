package oci

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

var hiddenSockets = []string{"/run/sandboxd/sandboxd.sock", "/run/sandboxd/sandboxd-sessions"}

// reexport exports what im says with the rest of in.
func reexport(in Input, im *Imported) Input {
	in.Policy, in.Argv, in.Env, in.Cwd, in.Terminal, in.Home = im.Policy, im.Argv, im.Env, im.Cwd, im.Terminal, ""
	return in
}

func marshal(t *testing.T, in Input) []byte {
	t.Helper()
	s, err := Export(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// missingCarveOutsDenied is in with each carve-out that does not exist on
// the host made a deny path: what its export imports as.
func missingCarveOutsDenied(in Input) Input {
	p := proto.Clone(in.Policy).(*sandboxdv1.Policy)
	fs := p.GetFilesystem()
	if fs == nil {
		return in
	}
	var ro []string
	for _, path := range fs.ReadOnly {
		if ok, _ := in.Exists(path); !ok && within(path, fs.Write) {
			fs.Deny = append(fs.Deny, path)
			continue
		}
		ro = append(ro, path)
	}
	fs.ReadOnly = ro
	in.Policy = p
	return in
}

// TestRoundTrip: export, import, export gives the same config, but for a
// carve-out that did not exist, which comes back denied, and the import
// the policy exported (normalized).
func TestRoundTrip(t *testing.T) {
	exportable(t)
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			first := marshal(t, c.in)
			im, err := Import(first, hiddenSockets)
			if err != nil {
				t.Fatalf("import of the export: %v\n%s", err, first)
			}
			want := marshal(t, missingCarveOutsDenied(c.in))
			second := marshal(t, reexport(c.in, im))
			if !bytes.Equal(want, second) {
				t.Fatalf("export, import, export differs:\n%s\nwant:\n%s", second, want)
			}
			im2, err := Import(second, hiddenSockets)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(im.Policy, im2.Policy) {
				t.Fatalf("imports differ: %v, %v", im.Policy, im2.Policy)
			}
		})
	}
}

// edit is a change to an exported config, as JSON.
type edit func(c map[string]any)

func obj(c map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		c = c[k].(map[string]any)
	}
	return c
}

func TestImportRefuses(t *testing.T) {
	exportable(t)
	base := marshal(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/w"}, Deny: []string{"/w/key"}}}, "make"))
	cases := []struct {
		path string
		edit edit
	}{
		{"hooks", func(c map[string]any) {
			c["hooks"] = map[string]any{"prestart": []any{map[string]any{"path": "/bin/evil"}}}
		}},
		{"linux.devices", func(c map[string]any) {
			obj(c, "linux")["devices"] = []any{map[string]any{"path": "/dev/kvm", "type": "c", "major": 10, "minor": 232}}
		}},
		{"process.capabilities.bounding", func(c map[string]any) {
			obj(c, "process", "capabilities")["bounding"] = []any{"CAP_SYS_ADMIN"}
		}},
		{"process.capabilities", func(c map[string]any) { delete(obj(c, "process"), "capabilities") }},
		{"surprise", func(c map[string]any) { c["surprise"] = true }},
		{"linux.seccomp.surprise", func(c map[string]any) { obj(c, "linux", "seccomp")["surprise"] = 1 }},
		{"process.rlimits", func(c map[string]any) {
			obj(c, "process")["rlimits"] = []any{map[string]any{"type": "RLIMIT_NOFILE", "hard": 10, "soft": 10}}
		}},
		{"linux.namespaces[0].path", func(c map[string]any) {
			obj(c, "linux")["namespaces"].([]any)[0].(map[string]any)["path"] = "/proc/1/ns/pid"
		}},
		{"mounts[1]", func(c map[string]any) { c["mounts"].([]any)[1].(map[string]any)["source"] = "/elsewhere" }},
		{"root.path", func(c map[string]any) { c["mounts"] = c["mounts"].([]any)[1:] }},
		{"linux.seccomp.syscalls[1]", func(c map[string]any) {
			sc := obj(c, "linux", "seccomp")
			sc["syscalls"] = append(sc["syscalls"].([]any)[:1], map[string]any{"names": []any{"read"}, "action": "SCMP_ACT_ERRNO"})
		}},
		{"linux.seccomp.defaultAction", func(c map[string]any) { obj(c, "linux", "seccomp")["defaultAction"] = "SCMP_ACT_ERRNO" }},
		{"linux.resources.devices[0]", func(c map[string]any) {
			obj(c, "linux")["resources"] = map[string]any{"devices": []any{map[string]any{"allow": true, "access": "rwm"}}}
		}},
		{"linux.sysctl", func(c map[string]any) { obj(c, "linux")["sysctl"] = map[string]any{"net.ipv4.ip_forward": "1"} }},
		{"mounts[2]", func(c map[string]any) {
			c["mounts"] = append(c["mounts"].([]any)[:2], append([]any{map[string]any{"destination": "/scratch", "type": "tmpfs", "source": "tmpfs"}}, c["mounts"].([]any)[2:]...)...)
		}},
		{"process.args", func(c map[string]any) { delete(obj(c, "process"), "args") }},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			var cfg map[string]any
			if err := json.Unmarshal(base, &cfg); err != nil {
				t.Fatal(err)
			}
			c.edit(cfg)
			data, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			im, err := Import(data, hiddenSockets)
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("want a refusal at %s, got %v (imported %v)", c.path, err, im)
			}
			if r.Field != c.path || r.Reason == "" {
				t.Fatalf("refused %s (%q), want %s with a reason", r.Field, r.Reason, c.path)
			}
		})
	}
	if _, err := Import(base, hiddenSockets); err != nil {
		t.Fatalf("the unedited config: %v", err)
	}
}

// TestImportReadOnlyTmpfsHides: a read-only tmpfs in a write root hides
// what is there under a runtime, whatever its mode, so it comes in as a
// deny path; a carve-out would show an existing directory's contents.
func TestImportReadOnlyTmpfsHides(t *testing.T) {
	exportable(t)
	base := marshal(t, input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/w"}}}, "make"))
	for _, mode := range []string{"mode=755", "mode=000", ""} {
		var cfg map[string]any
		if err := json.Unmarshal(base, &cfg); err != nil {
			t.Fatal(err)
		}
		opts := []any{"ro", "nosuid", "nodev"}
		if mode != "" {
			opts = append(opts, mode)
		}
		cfg["mounts"] = append(cfg["mounts"].([]any), map[string]any{"destination": "/w/secrets", "type": "tmpfs", "source": "tmpfs", "options": opts})
		data, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		im, err := Import(data, hiddenSockets)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		fs := im.Policy.GetFilesystem()
		if !slices.Contains(fs.GetDeny(), "/w/secrets") || slices.Contains(fs.GetReadOnly(), "/w/secrets") {
			t.Errorf("%q: read-only tmpfs at /w/secrets imported as deny %v, read-only %v; want it denied", mode, fs.GetDeny(), fs.GetReadOnly())
		}
	}
}

// FuzzImport: no config makes the importer fail other than with an
// error; what it takes is a valid policy that exports (or is refused
// with a field) and comes back from that export the same.
func FuzzImport(f *testing.F) {
	exportable(f)
	golden, err := filepath.Glob(filepath.Join("testdata", "export", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		im, err := Import(data, hiddenSockets)
		if err != nil {
			return
		}
		in := Input{Policy: im.Policy, Argv: im.Argv, Env: im.Env, Cwd: im.Cwd, Terminal: im.Terminal,
			UID: 65533, GID: 65533, Root: "rootfs", Exists: func(string) (bool, bool) { return true, true }}
		s, err := Export(in)
		if err != nil {
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("export of an import failed without a refusal: %v", err)
			}
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Import(b, hiddenSockets)
		if err != nil {
			t.Fatalf("import of the export of an import: %v\n%s", err, b)
		}
		if !proto.Equal(back.Policy, im.Policy) {
			t.Fatalf("policy changed through export: %v, then %v", im.Policy, back.Policy)
		}
	})
}
