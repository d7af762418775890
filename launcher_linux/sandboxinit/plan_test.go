package sandboxinit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestProgramRoundTrips(t *testing.T) {
	prog := Program{{Code: 0x20, K: 4}, {Code: 0x15, Jt: 1, Jf: 0, K: 0xc000003e}, {Code: 0x06, K: 0x7fff0000}}
	b, err := json.Marshal(ExecPlan{Seccomp: prog})
	if err != nil {
		t.Fatal(err)
	}
	var got ExecPlan
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Seccomp, prog) {
		t.Errorf("decoded %+v, want %+v (from %s)", got.Seccomp, prog, b)
	}
}

func TestProgramRefusesPartialInstructions(t *testing.T) {
	var p Program
	err := json.Unmarshal([]byte(`"AAECAwQFBg=="`), &p) // seven bytes
	if err == nil || !strings.Contains(err.Error(), "not whole instructions") {
		t.Errorf("seven bytes decoded to %+v, %v", p, err)
	}
}
