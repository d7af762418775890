package main

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
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

// TestNothingAllocatesBeforeOneproc: the processor oneproc gives up takes
// its cache of spans with it, a page of the runtime's to hand back each
// size class in it, and the initialisers before oneproc's run on either
// processor; so none of them may allocate.
func TestNothingAllocatesBeforeOneproc(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := regexp.MustCompile(`(?m)^init (\S+) @.*, (\d+) bytes, (\d+) allocs$`).FindAllSubmatch(out, -1)
	for _, l := range lines {
		if string(l[1]) == "github.com/sandboxd/sandboxd/cmd/sandboxctl/internal/oneproc" {
			return
		}
		if string(l[2]) != "0" {
			t.Errorf("%s is initialised before oneproc and allocates %s bytes in %s allocations", l[1], l[2], l[3])
		}
	}
	t.Fatalf("oneproc is not initialised:\n%s", out)
}

// TestOneProcessorUnlessGOMAXPROCSIsSet: oneproc sets one processor, and
// main gives back what $GOMAXPROCS asks for.
func TestOneProcessorUnlessGOMAXPROCSIsSet(t *testing.T) {
	if v, set := os.LookupEnv("GOMAXPROCS"); set {
		if want, err := strconv.Atoi(v); err == nil && runtime.GOMAXPROCS(0) != want {
			t.Errorf("with GOMAXPROCS=%s the runtime has %d processors", v, runtime.GOMAXPROCS(0))
		}
		return
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("the runtime has %d processors, want 1", n)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOneProcessorUnlessGOMAXPROCSIsSet$")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("with GOMAXPROCS=3: %v\n%s", err, out)
	}
}
