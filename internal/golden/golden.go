// Package golden compares what a test produced with a file under its
// package's testdata, and rewrites that file when the tests run with
// -update, so that a deliberate change shows up as the file's diff.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check fails t unless got is the content of testdata/name. With -update
// it first writes got there.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	line, g, w := firstDifference(got, want)
	t.Errorf("%s differs at line %d (go test -update rewrites it, then review the diff):\n got: %s\nwant: %s", path, line, g, w)
}

// firstDifference returns the first line, counted from 1, on which a and b
// differ, and that line of each; a missing line is shown as "(end)".
func firstDifference(a, b []byte) (int, string, string) {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; ; i++ {
		x, y := "(end)", "(end)"
		if i < len(al) {
			x = string(al[i])
		}
		if i < len(bl) {
			y = string(bl[i])
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return i + 1, x, y
		}
	}
}
