package transport

import (
	"strings"
	"testing"
)

func TestListenRefusesNonPipes(t *testing.T) {
	for _, path := range []string{`C:\ProgramData\sandboxd\sandboxd.sock`, `\\.\pipe\`, `\\host\pipe\sandboxd`} {
		if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "not a local named pipe") {
			t.Errorf("Listen(%q) = %v, want a refusal", path, err)
		}
	}
}
