//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDetachWriter runs the built probe: detach-writer re-executes it.
func TestDetachWriter(t *testing.T) {
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	if out, err := exec.Command("go", "build", "-o", probe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	target := filepath.Join(dir, "written")
	begin := time.Now()
	out, err := exec.Command(probe, "detach-writer", target, "300ms").Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if took := time.Since(begin); took > 250*time.Millisecond {
		t.Errorf("detach-writer took %v to return; it must not wait for its writer", took)
	}
	if _, err := os.Stat(target); err == nil {
		t.Errorf("%s written before the delay", target)
	}
	t.Logf("%s", out)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(target)
		if err == nil && string(b) == Payload {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within 5s: %q %v", target, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCPUBurn(t *testing.T) {
	r := cpuBurn([]string{"200ms"})
	d := r.Detail.(map[string]any)
	if !r.OK || d["wall_seconds"].(float64) < 0.2 || d["cpu_seconds"].(float64) <= 0 {
		t.Errorf("cpu-burn 200ms: %+v", r)
	}
}
