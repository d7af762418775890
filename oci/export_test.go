package oci

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/export")

// hostTree is the host a test exports on: directories end in "/".
var hostTree = map[string]bool{
	"/w": true, "/w/.git": true, "/w/key": false, "/w/secrets": true, "/w/sub": true, "/w/sub/deep": true,
	"/home": true, "/home/u": true, "/home/u/.ssh": true, "/etc/shadow": false, "/run": true, "/run/sandboxd": true, "/run/sandboxd/sandboxd.sock": false,
	"/var": true, "/var/lib": true, "/var/lib/sandboxd": true,
}

// exportable skips a test on a host where Export cannot run its cases:
// sandboxd's seccomp tables, which the export's plan is made with, exist
// for amd64 and arm64 only (sandboxd refuses other architectures), and policy paths
// are checked by the host OS's rules, which on Windows are not the Linux
// paths of an OCI config.
func exportable(t testing.TB) {
	t.Helper()
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("sandboxd's seccomp tables exist for amd64 and arm64 only; this is %s", runtime.GOARCH)
	}
	if runtime.GOOS == "windows" {
		t.Skip("policy paths are checked by Windows' rules here, and an OCI config's are Linux's")
	}
}

func fakeExists(p string) (bool, bool) {
	d, ok := hostTree[p]
	return ok, d
}

func input(p *sandboxdv1.Policy, argv ...string) Input {
	return Input{
		Policy: p, Argv: argv, Cwd: "/w", UID: 65533, GID: 65533, Root: "rootfs",
		Exists: fakeExists, HideSockets: []string{"/run/sandboxd/sandboxd.sock", "/run/sandboxd/sandboxd-sessions"},
	}
}

type goldenCase struct {
	name string
	in   Input
}

// goldenCases are the exports testdata/export holds.
func goldenCases() []goldenCase {
	workspace := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Write:    []string{"/w"},
			ReadOnly: []string{"/w/.git", "/w/not-yet", "/w/sub/deep"},
			Deny:     []string{"/w/key", "/w/secrets", "/home/u/.ssh", "/etc/shadow", "/nonexistent"},
		},
		Limits: &sandboxdv1.Limits{MemoryBytes: 64 << 20, Pids: 100, CpuMillis: 500},
	}
	return []goldenCase{
		{"default", input(nil, "/bin/true")},
		{"workspace", func() Input {
			in := input(workspace, "make", "-j2")
			in.Env = map[string]string{"GREETING": "hi", "PATH": "/opt/bin:/usr/bin"}
			in.Home = "/home/sandbox"
			return in
		}()},
		{"host-network-tty", func() Input {
			in := input(&sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}, Filesystem: &sandboxdv1.Filesystem{Write: []string{"/tmp"}}}, "bash")
			in.Terminal = true
			return in
		}()},
		{"small-cpu", input(&sandboxdv1.Policy{Limits: &sandboxdv1.Limits{CpuMillis: 5}}, "/bin/true")},
		{"write-everything", input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/"}, Deny: []string{"/home/u/.ssh"}}}, "sh")},
	}
}

func TestExportGolden(t *testing.T) {
	exportable(t)
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			s, err := Export(c.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			// The seccomp rules are the architecture's: amd64's are the
			// files of testdata/export, another's in a directory of its
			// name.
			golden := filepath.Join("testdata", "export", c.name+".json")
			if runtime.GOARCH != "amd64" {
				golden = filepath.Join("testdata", "export", runtime.GOARCH, c.name+".json")
			}
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./oci -run TestExportGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the export:\n%s", golden, got)
			}
		})
	}
}

func TestExportRefuses(t *testing.T) {
	exportable(t)
	cases := []struct {
		field string
		in    Input
	}{
		{"network.allow", input(&sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}}}}, "true")},
		{"children.allow", input(&sandboxdv1.Policy{Children: &sandboxdv1.Children{Allow: true}}, "true")},
		{"limits.timeout", input(&sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(60e9)}}, "true")},
		{"limits.output_bytes", input(&sandboxdv1.Policy{Limits: &sandboxdv1.Limits{OutputBytes: 1 << 20}}, "true")},
		{"filesystem.read", input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_LISTED, ReadRoots: []string{"/usr"}}}, "true")},
		// /w/missing, on the way to the carve-out, would be a plain
		// directory the sandbox could rename with the mount inside.
		{"filesystem.read_only", input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/w"}, ReadOnly: []string{"/w/missing/c"}}}, "true")},
		{"filesystem.deny", input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/w"}, Deny: []string{"/w/missing/d"}}}, "true")},
		{"process", func() Input { in := input(nil, "true"); in.UID = 0; return in }()},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			s, err := Export(c.in)
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("want a refusal of %s, got %v (config %v)", c.field, err, s)
			}
			if r.Field != c.field || r.Reason == "" {
				t.Fatalf("refused %q (%q), want %s with a reason", r.Field, r.Reason, c.field)
			}
		})
	}
}

// The seccomp rules say the same as the listener-less BPF program of
// the namespaces set; see seccomp_test.go. Here: the export carries them.
func TestExportSeccompFollowsNetwork(t *testing.T) {
	exportable(t)
	for _, mode := range []sandboxdv1.Network_Mode{sandboxdv1.Network_NONE, sandboxdv1.Network_HOST} {
		s, err := Export(input(&sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: mode}}, "true"))
		if err != nil {
			t.Fatal(err)
		}
		socketRules := 0
		for _, r := range s.Linux.Seccomp.Syscalls {
			if len(r.Names) == 1 && r.Names[0] == "socket" {
				socketRules++
			}
		}
		if (mode == sandboxdv1.Network_NONE) != (socketRules > 0) {
			t.Errorf("network %v: %d socket rules", mode, socketRules)
		}
		netns := false
		for _, ns := range s.Linux.Namespaces {
			netns = netns || ns.Type == "network"
		}
		if netns != (mode == sandboxdv1.Network_NONE) {
			t.Errorf("network %v: network namespace %v", mode, netns)
		}
	}
}

// The daemon's state directory is kept from a container as from the
// daemon's sandboxes: a grant of / must not reach the journal the next
// daemon obeys. One that is not there has nothing to keep.
func TestExportMasksDaemonState(t *testing.T) {
	exportable(t)
	in := input(&sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/"}}}, "true")
	in.Protect = []string{"/var/lib/sandboxd", "/var/lib/missing"}
	spec, err := Export(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(spec.Linux.MaskedPaths, "/var/lib/sandboxd") {
		t.Errorf("the state directory is not masked: %q", spec.Linux.MaskedPaths)
	}
	if slices.Contains(spec.Linux.MaskedPaths, "/var/lib/missing") {
		t.Errorf("a missing state directory is masked: %q", spec.Linux.MaskedPaths)
	}
}
