package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestLinksOnlyWhatAClientNeeds: every package a Go program links is
// initialised at every start, whether the command uses it or not, so
// sandboxctl as make builds it must not link the daemon's side (its
// terminal emulator among it), nor golang.org/x/net/trace and html/template, which gRPC links for a debug
// page of its own unless built with the grpcnotrace tag.
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
	for _, heavy := range []string{
		"golang.org/x/net/trace",
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
