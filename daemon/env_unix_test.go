//go:build !windows

package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestHomeDir(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	write := func(content string) {
		t.Helper()
		// Another file renamed over the old, as useradd and vipw do.
		tmp := passwd + ".new"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, passwd); err != nil {
			t.Fatal(err)
		}
	}
	write("root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" +
		"odd:x:77:77::relative:/bin/sh\n" +
		"odd2:x:77:77::/odd:/bin/sh\n" +
		"twice:x:99:99::/first:/bin/sh\n" +
		"twice:x:99:99::/second:/bin/sh\n" +
		"short:x:88\n")
	var homes passwdHomes
	for uid, want := range map[uint32]string{0: "/root", 65534: "/nonexistent", 77: "/odd", 88: "/", 99: "/first", 1000: "/"} {
		if got := homes.lookup(passwd, uid); got != want {
			t.Errorf("home of %d = %q, want %q", uid, got, want)
		}
	}
	// A user added while the daemon runs gets its home at the next launch.
	write("root:x:0:0:root:/root:/bin/sh\nnew:x:1000:1000::/home/new:/bin/sh\n")
	if got := homes.lookup(passwd, 1000); got != "/home/new" {
		t.Errorf("home of a user added since = %q, want /home/new", got)
	}
	// So does one whose file is edited in place, to the same size.
	f, err := os.OpenFile(passwd, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("/home/wen"), int64(len("root:x:0:0:root:/root:/bin/sh\nnew:x:1000:1000::"))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The modification time may not have moved on a coarse clock; set it.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(passwd, later, later); err != nil {
		t.Fatal(err)
	}
	if got := homes.lookup(passwd, 1000); got != "/home/wen" {
		t.Errorf("home after an edit in place = %q, want /home/wen", got)
	}
	if got := homes.lookup(filepath.Join(t.TempDir(), "missing"), 0); got != "/" {
		t.Errorf("home without a passwd file = %q", got)
	}
}
