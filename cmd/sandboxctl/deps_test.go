package main

import (
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLinksOnlyWhatAClientNeeds: every package a Go program links is
// initialised at every start, whether the command uses it or not, and a
// bigger binary starts slower, so sandboxctl as make builds it must not
// link the daemon's side (its terminal emulator among it), nor grpc-go
// beyond its codes and status (api/client speaks the protocol itself), nor
// net/http and golang.org/x/net/http2, which grpc-go would bring, nor
// x/net's HPACK, whose initialiser builds maps of its static table (the
// client's transport has an HPACK of its own), nor genproto's errdetails,
// whose initialiser registers a dozen message types (the client reads the
// RetryInfo it needs from its encoding).
func TestLinksOnlyWhatAClientNeeds(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\t.*\$\(GO\) build .*-o bin/sandboxctl .*$`).Find(makefile)
	if line == nil {
		t.Fatal("no line building bin/sandboxctl in the Makefile")
	}
	m := regexp.MustCompile(`-tags=(\S+)`).FindSubmatch(line)
	if m == nil {
		t.Fatalf("the Makefile builds sandboxctl without -tags: %s", line)
	}
	goTags := regexp.MustCompile(`(?m)^GO_TAGS := (\S+)$`).FindSubmatch(makefile)
	if goTags == nil {
		t.Fatal("no GO_TAGS in the Makefile")
	}
	tags := strings.ReplaceAll(string(m[1]), "$(GO_TAGS)", string(goTags[1]))
	list := exec.Command(gobin, "list", "-deps", "-tags="+tags, ".")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags=%s: %v", tags, err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		if strings.HasPrefix(dep, "google.golang.org/grpc/") && !grpcAllowed(dep) || dep == "google.golang.org/grpc" {
			t.Errorf("sandboxctl built with -tags=%s links %s", tags, dep)
		}
	}
	for _, heavy := range []string{
		"golang.org/x/net/trace",
		"golang.org/x/net/http2",
		"golang.org/x/net/http2/hpack",
		"google.golang.org/genproto/googleapis/rpc/errdetails",
		"net/http",
		"crypto/tls",
		"html/template",
		"github.com/sandboxd/sandboxd/daemon",
		"github.com/sandboxd/sandboxd/layers",
		"go.podman.io/storage",
		"github.com/sandboxd/sandboxd/netproxy",
		"github.com/sandboxd/sandboxd/internal/vterm",
		"github.com/charmbracelet/x/vt",
	} {
		if deps[heavy] {
			t.Errorf("sandboxctl built with -tags=%s links %s", tags, heavy)
		}
	}
}

// grpcAllowed says whether sandboxctl may link the grpc-go package p: the
// client keeps gRPC's codes and status in its errors, and those import a
// few packages of grpc-go's own, none with more than a trivial
// initialisation.
func grpcAllowed(p string) bool {
	switch p {
	case "google.golang.org/grpc/codes", "google.golang.org/grpc/status",
		"google.golang.org/grpc/internal/status", "google.golang.org/grpc/internal",
		"google.golang.org/grpc/grpclog", "google.golang.org/grpc/grpclog/internal",
		"google.golang.org/grpc/connectivity", "google.golang.org/grpc/serviceconfig":
		return true
	}
	return false
}

// TestLinkedPackagesStartCheaply: a package's package-level tables are
// built at every start of sandboxctl, --help included, whether the command
// uses them or not, so the packages of this module that sandboxctl links
// for a few commands (export-oci, run --oci, import) build theirs at first
// use. The test binary links them as sandboxctl does; the runtime reports
// what each package's initialisation allocated.
func TestLinkedPackagesStartCheaply(t *testing.T) {
	const limit = 4096 // bytes; a map of a hundred entries is several times that
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -test.run=^$: %v\n%s", os.Args[0], err, out)
	}
	lines := regexp.MustCompile(`(?m)^init (\S+) @.*, (\d+) bytes, \d+ allocs$`).FindAllSubmatch(out, -1)
	if len(lines) == 0 {
		t.Fatalf("no initialisation reported with GODEBUG=inittrace=1:\n%s", out)
	}
	for _, l := range lines {
		pkg := string(l[1])
		switch pkg {
		case "github.com/sandboxd/sandboxd/policy", "github.com/sandboxd/sandboxd/profiles",
			"github.com/sandboxd/sandboxd/oci", "github.com/sandboxd/sandboxd/launcher",
			"github.com/sandboxd/sandboxd/launcher_linux", "github.com/sandboxd/sandboxd/launcher_linux/sandboxinit":
		default:
			continue
		}
		if n, _ := strconv.Atoi(string(l[2])); n > limit {
			t.Errorf("initialising %s allocates %d bytes at every start of sandboxctl (more than %d): build its tables at first use", pkg, n, limit)
		}
	}
}
