package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStartupPackagesBeforeTheProtobufRuntime: oneproc and mainstack save
// what they save only if they run before the initialisers of the protobuf
// runtime and the generated messages, the largest and deepest of a
// start's.
func TestStartupPackagesBeforeTheProtobufRuntime(t *testing.T) {
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
	startup := map[string]bool{
		"github.com/sandboxd/sandboxd/cmd/sandboxctl/internal/oneproc":   true,
		"github.com/sandboxd/sandboxd/cmd/sandboxctl/internal/mainstack": true,
	}
	for early := range startup {
		seen := false
		for _, p := range order {
			if p == early {
				seen = true
				break
			}
			if startup[p] {
				continue
			}
			if strings.HasPrefix(p, "google.golang.org/") || strings.HasPrefix(p, "github.com/sandboxd/") {
				t.Errorf("%s is initialised before %s", p, early)
			}
		}
		if !seen {
			t.Errorf("%s is not initialised: %q", early, order)
		}
	}
}
