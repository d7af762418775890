package conformance

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// probeXattr is the extended attribute the probe sets and removes.
const probeXattr = "user.sandboxd-probe"

// linuxMeta is a path's extended attributes and inode flags, as the host
// sees them.
func linuxMeta(t *testing.T, path string) string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		t.Fatalf("host: listxattr %s: %v", path, err)
	}
	names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
	slices.Sort(names)
	flags := "-"
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		if f, err := os.Open(path); err == nil {
			v, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
			f.Close()
			if err != nil {
				t.Fatalf("host: FS_IOC_GETFLAGS %s: %v", path, err)
			}
			flags = fmt.Sprintf("%#x", v)
		}
	}
	return fmt.Sprintf("xattrs %q flags %s", names, flags)
}

// metaDenials waits for the session's denials like wants.
func metaDenials(t *testing.T, s *session, wants ...denialWant) {
	t.Helper()
	recordedDenials(t, s.res.SessionID, wants...)
}

func linuxMetadataCases() []conformanceCase {
	return []conformanceCase{
		{name: "cannot change xattrs or inode flags outside write roots", linuxOnly: "extended attributes, inode-flag ioctls and Linux's newest metadata calls", setup: func(f *fixture) spec {
			w := f.mkdir("w")
			in := f.file("w/file", "mine\n")
			o := f.file("outside/file", "host\n")
			if err := unix.Setxattr(o, probeXattr, []byte("host"), 0); err != nil {
				f.t.Fatal(err)
			}
			if err := unix.Setxattr(in, probeXattr, []byte("host"), 0); err != nil {
				f.t.Fatal(err)
			}
			before := hostMeta(f.t, o)
			return spec{
				policy: fsPolicy(list(w), nil, nil),
				steps: []step{
					deny("setxattr", o),
					deny("removexattr", o),
					deny("chattr", o),
					deny("fchmod-ro", o),
					deny("fchmodat2", o),
					deny("setxattrat", o),
					allow("getxattr", o),
					allow("removexattr", in),
					allow("setxattrat", in),
					allow("chattr", in),
					allow("fchmod-ro", in),
					allow("fchmodat2", in),
				},
				after: func(t *testing.T, s *session) {
					sameMeta(t, o, before)
					m := hostMeta(t, in)
					if m.mode&0o7777 != 0o606 || !strings.Contains(m.linux, probeXattr) {
						t.Errorf("inside the write root: %v, want mode 606 and %s set again", m, probeXattr)
					}
					metaDenials(t, s,
						denialWant{field: "filesystem.write", operation: "setxattr", target: o, errno: "EROFS"},
						denialWant{field: "filesystem.write", operation: "ioctl FS_IOC_SETFLAGS", target: o, errno: "EROFS"},
						denialWant{field: "filesystem.write", operation: "fchmod", target: o, errno: "EROFS"},
						denialWant{field: "filesystem.write", operation: "setxattrat", target: o, errno: "EROFS"})
				},
			}
		}},
		{name: "deny path's xattrs and O_PATH fds are not seen", linuxOnly: "extended attributes, statx and O_PATH", setup: func(f *fixture) spec {
			ssh := f.mkdir("home/.ssh")
			key := f.file("home/.ssh/id_rsa", "PRIVATE KEY\n")
			if err := unix.Setxattr(key, probeXattr, []byte("secret"), 0); err != nil {
				f.t.Fatal(err)
			}
			w := f.mkdir("w")
			before := hostMeta(f.t, key)
			return spec{
				policy: fsPolicy(list(w), nil, list(ssh)),
				steps: []step{
					deny("getxattr", key),
					deny("listxattr", key),
					deny("statx", key),
					deny("opath-stat", key),
					deny("openat2-opath", key),
					deny("setxattr", key),
					deny("chattr", key),
					allow("statx", w),
				},
				after: func(t *testing.T, s *session) {
					sameMeta(t, key, before)
					metaDenials(t, s, denialWant{field: "filesystem.deny", operation: "setxattr", target: key})
				},
			}
		}},
	}
}
