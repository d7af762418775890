package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOneProcessorBeforeTheProtobufRuntime: oneproc saves what it saves
// only if it runs before the initialisers of the protobuf runtime and the
// generated messages, the largest of a start's.
func TestOneProcessorBeforeTheProtobufRuntime(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var order []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "init" {
			order = append(order, f[1])
		}
	}
	const oneproc = "github.com/sandboxd/sandboxd/cmd/sandboxctl/internal/oneproc"
	seen := false
	for _, p := range order {
		if p == oneproc {
			seen = true
			break
		}
		if strings.HasPrefix(p, "google.golang.org/") || strings.HasPrefix(p, "github.com/sandboxd/") {
			t.Errorf("%s is initialised before oneproc", p)
		}
	}
	if !seen {
		t.Fatalf("oneproc is not initialised: %q", order)
	}
}
