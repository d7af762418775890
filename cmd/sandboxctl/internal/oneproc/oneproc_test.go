package oneproc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

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
