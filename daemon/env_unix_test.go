//go:build !windows

package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHomeDir(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/sh\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"+
		"odd:x:77:77::relative:/bin/sh\n"+
		"short:x:88\n"), 0o644)
	for uid, want := range map[uint32]string{0: "/root", 65534: "/nonexistent", 77: "/", 88: "/", 1000: "/"} {
		if got := homeDir(passwd, uid); got != want {
			t.Errorf("homeDir(%d) = %q, want %q", uid, got, want)
		}
	}
	if got := homeDir(filepath.Join(t.TempDir(), "missing"), 0); got != "/" {
		t.Errorf("homeDir without a passwd file = %q", got)
	}
}
