package launcherlinux

import (
	"strings"
	"testing"
)

// The sandbox's /dev, /dev/shm and /tmp are directories of the init's one
// tmpfs, each bound in place: one filesystem between them (no superblock
// apiece for the session's life), yet three mounts, with the modes a fresh
// tmpfs of each would have, and nothing of the init's tmpfs in sight.
func TestOwnDirectoriesShareOneTmpfs(t *testing.T) {
	script := `stat -f -c 'type %t' /dev /dev/shm /tmp
stat -c 'dev %d mode %a' /dev /dev/shm /tmp
[ -z "$(ls -A /tmp; ls -A /dev/shm)" ] && echo both-empty
[ "$(stat -c %d:%i /tmp/..)" = "$(stat -c %d:%i /)" ] && echo tmp-parent-is-root
echo x > /tmp/a && echo tmp-written
ln /tmp/a /dev/shm/a 2>/dev/null || echo link-refused
echo y > /dev/shm/b && echo shm-written
`
	out, serr, st := run(t, nil, "/bin/sh", "-c", script)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 6 {
		t.Fatalf("short output %q", out)
	}
	for _, l := range lines[:3] {
		if l != "type 1021994" {
			t.Errorf("%q: want a tmpfs (type 1021994)", l)
		}
	}
	dev := func(l string) string { return strings.Fields(l)[1] }
	if dev(lines[3]) != dev(lines[4]) || dev(lines[4]) != dev(lines[5]) {
		t.Errorf("/dev, /dev/shm and /tmp are not one filesystem: %q", lines[3:6])
	}
	for i, mode := range []string{"755", "1777", "1777"} {
		if f := strings.Fields(lines[3+i]); f[3] != mode {
			t.Errorf("%q: want mode %s", lines[3+i], mode)
		}
	}
	// A hard link fails across mounts even within one filesystem: the
	// two are separate mounts, as two tmpfs were.
	for _, want := range []string{"both-empty", "tmp-parent-is-root", "tmp-written", "link-refused", "shm-written"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
}
