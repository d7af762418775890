package oneproc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// TestOneProcessorWhateverGOMAXPROCSSays: the initialiser cannot read
// $GOMAXPROCS (Honour does, later), so the test binary, which does not
// call Honour, has one processor with the variable set too.
func TestOneProcessorWhateverGOMAXPROCSSays(t *testing.T) {
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("the runtime has %d processors, want 1", n)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOneProcessorWhateverGOMAXPROCSSays$")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("with GOMAXPROCS=3: %v\n%s", err, out)
	}
}

func TestHonour(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		value string
		set   bool
		want  int
	}{
		{"3", true, 3},
		{"+2", true, 2},
		{"3", false, 1},
		{"", true, 1},
		{"0", true, 1},
		{"-2", true, 1},
		{"two", true, 1},
		{"2x", true, 1},
		{"2147483648", true, 1},
	} {
		runtime.GOMAXPROCS(1)
		Honour(c.value, c.set)
		if got := runtime.GOMAXPROCS(0); got != c.want {
			t.Errorf("Honour(%q, %v): %d processors, want %d", c.value, c.set, got, c.want)
		}
	}
}

// TestProcessorsParsesAsTheRuntime: the runtime keeps $GOMAXPROCS if
// strconv.ParseInt(value, 10, 32) takes it and it is above 0.
func TestProcessorsParsesAsTheRuntime(t *testing.T) {
	for _, v := range []string{
		"", "0", "1", "2", "+2", "-2", "+", "-", "++2", "007", " 2", "2 ", "2.0", "1_000", "0x10",
		"2147483647", "+2147483647", "2147483648", "99999999999999999999", "٣",
		// Above 2^32, wrapping to a small number in a 32-bit int.
		"4294967297", "4294967298", "0004294967297", "21474836480",
	} {
		want, err := strconv.ParseInt(v, 10, 32)
		wantOK := err == nil && want > 0
		got, ok := processors(v)
		if ok != wantOK || ok && int64(got) != want {
			t.Errorf("processors(%q) = %d, %v; the runtime reads %d, %v", v, got, ok, want, wantOK)
		}
	}
}
