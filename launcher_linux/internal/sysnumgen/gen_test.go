package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The committed tables are what the generator writes from the x/sys
// version go.mod names: a new x/sys (new syscalls, corrected numbers)
// fails here until the tables are generated again.
func TestTablesAreGenerated(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("go list -m golang.org/x/sys: %v", err)
	}
	files, err := Generate(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("launcher_linux/%s is stale: run go generate ./launcher_linux", name)
		}
	}
}

func TestConstName(t *testing.T) {
	for in, want := range map[string]string{"io_uring_setup": "nrIoUringSetup", "_sysctl": "nrSysctl", "fchmodat2": "nrFchmodat2"} {
		if got := constName(in); got != want {
			t.Errorf("constName(%q) = %q, want %q", in, got, want)
		}
	}
}
