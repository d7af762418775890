package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/initbuild"
)

func TestSelfTestFlag(t *testing.T) {
	// The test binary is the daemon here, and has no init beside it.
	init, err := initbuild.Shared()
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"", "namespaces", "landlock"} {
		t.Run("mechanism="+set, func(t *testing.T) {
			// No server: the socket is never created, and its directory is
			// under /tmp, so the fixtures go to /var/tmp.
			sock := filepath.Join(t.TempDir(), "d.sock")
			args := []string{"--self-test", "--socket", sock, "--init", init}
			if set != "" {
				args = append(args, "--mechanism", set)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			out := stdout.String()
			if set != "" && code == 1 && strings.Contains(out, "FAIL start: cannot enforce") {
				t.Skipf("this host refuses mechanism set %s:\n%s", set, out)
			}
			if code != 0 {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr.String(), out)
			}
			for _, want := range []string{"backend: linux\n", "\nhost:\n", "\nprobes:\n", "\nmechanism sets (", "\nfeatures:\n", "\nself-test: passed (mechanism set ", "ok   read-deny: "} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in\n%s", want, out)
				}
			}
			if set != "" && !strings.Contains(out, "mechanism sets (forced: "+set+")") {
				t.Errorf("forced set not reported:\n%s", out)
			}
			if _, err := os.Lstat(sock); !os.IsNotExist(err) {
				t.Errorf("--self-test created the socket: %v", err)
			}
		})
	}
}
