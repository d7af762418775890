package launcherlinux

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/unix"
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

// envDirentProbe names a directory whose entries the test binary, run in
// a sandbox, lists with direntProbe.
const envDirentProbe = "SANDBOXD_TEST_DIRENT_PROBE"

// direntProbe prints a line "NAME DIRENT-INO STAT-DEV:STAT-INO" for each
// entry of dir and exits: the inode the directory itself names, beneath
// any mount on the name, and the one a lookup of the name reaches.
func direntProbe(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			fmt.Println("getdents:", err)
			os.Exit(1)
		}
		if n == 0 {
			os.Exit(0)
		}
		// struct linux_dirent64: ino, off, reclen, type, name.
		for b := buf[:n]; len(b) >= 19; {
			ino, reclen := binary.NativeEndian.Uint64(b), int(binary.NativeEndian.Uint16(b[16:]))
			name := string(b[19:reclen])
			name = name[:strings.IndexByte(name, 0)]
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				fmt.Printf("%s %d %d:%d\n", name, ino, st.Dev, st.Ino)
			}
			b = b[reclen:]
		}
	}
}

// A device node of the sandbox's /dev is the host's, bound onto a name in
// the init's tmpfs. The names are links of one inode there, which the
// binds hide, not an inode apiece kept for the session's life.
func TestDeviceMountPointsShareOneInode(t *testing.T) {
	// Before Linux 6.10 linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH
	// of the host's user namespace, which an init in a namespace of its
	// own never has; it then makes a file per mount point, as before.
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", unix.ByteSliceToString(u.Release[:]), err)
	}
	if major < 6 || major == 6 && minor < 10 {
		t.Skipf("Linux %d.%d: linkat(AT_EMPTY_PATH) from a user namespace needs 6.10; the init keeps a file per device mount point", major, minor)
	}
	out, serr, st := run(t, nil, "/usr/bin/env", envDirentProbe+"=/dev", probeBinary(t), "-test.run=^$")
	if st.ExitCode != 0 {
		t.Fatalf("status %+v\nstdout:\n%s\nstderr:\n%s", st, out, serr)
	}
	under, reached := map[string]string{}, map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			under[f[0]], reached[f[0]] = f[1], f[2]
		}
	}
	dev := func(n string) string { return strings.Split(reached[n], ":")[0] }
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if reached[n] == "" || dev(n) == dev(".") {
			t.Errorf("/dev/%s: no mount on the name (reached %q, /dev is device %s)\n%s", n, reached[n], dev("."), out)
		}
	}
	for _, n := range []string{"zero", "full", "random", "urandom", "tty"} {
		if under[n] == "" || under[n] != under["null"] {
			t.Errorf("/dev/%s is over inode %q of the init's tmpfs, /dev/null over %q: want one inode\n%s", n, under[n], under["null"], out)
		}
	}
}

// The init detaches the host's tree it built the sandbox's root from
// before the command runs: beneath the root, the tree would hold a mount
// for each of the host's for the session's life, and a copy of the whole
// host beside untrusted code. Under a write root at "/", the bind of "/"
// also covers the read-only clone of the host's tree the root starts as,
// which must not stay beneath it either.
func TestSessionLeavesNoHiddenMounts(t *testing.T) {
	for _, c := range []struct {
		name string
		pol  *sandboxdv1.Policy
	}{
		{"default", nil},
		{"write root at /", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := newBackend(t).Start(context.Background(), testSpec(t, c.pol, "/bin/sleep", "60"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				p.Kill()
				p.Wait()
			}()
			noHiddenMounts(t, p.Pid())
		})
	}
}

// noHiddenMounts checks, as soon as the start is reported, that every
// mount in the namespace of the init pid but its own tmpfs, the
// namespace's root, is one the sandbox's root reaches.
func noHiddenMounts(t *testing.T, pid int) {
	t.Helper()
	// The init's root is the sandbox's, once it has set it up: its
	// mountinfo lists what the sandbox reaches.
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	reached := strings.Count(string(mountinfo), "\n")
	if all := namespaceMounts(t, pid); all != reached+1 {
		t.Errorf("%d mounts in the session's namespace, %d reached from its root: want one more (the init's tmpfs)\n%s", all, reached, mountinfo)
	}
}

// namespaceMounts counts every mount in the mount namespace of pid, those
// its root does not reach too, with listmount(2).
func namespaceMounts(t *testing.T, pid int) int {
	t.Helper()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var id uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, ns.Fd(), unix.NS_GET_MNTNS_ID, uintptr(unsafe.Pointer(&id))); e != 0 {
		t.Fatalf("NS_GET_MNTNS_ID: %v", e)
	}
	req := struct {
		size, spare        uint32
		mntID, param, nsID uint64
	}{size: unix.MNT_ID_REQ_SIZE_VER1, mntID: ^uint64(0), nsID: id}
	ids := make([]uint64, 4096)
	n, _, e := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)), uintptr(unsafe.Pointer(&ids[0])), uintptr(len(ids)), 0, 0, 0)
	if e != 0 {
		t.Fatalf("listmount: %v", e)
	}
	return int(n)
}
