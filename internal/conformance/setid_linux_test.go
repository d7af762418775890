package conformance

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestNoSetIDInIDMappedRoot: what the sandbox makes in an ID-mapped write
// root is root's on the host, so no set-user-ID or set-group-ID bit may
// reach it, by chmod, by a create's mode or by openat2; each refusal is
// recorded (issue 21 item 2). Checked from the host side.
func TestNoSetIDInIDMappedRoot(t *testing.T) {
	if !idmapsHere() {
		t.Skip("this pass ID-maps no write root (rootless daemon or the landlock set); that such a root is refused there is TestRootCallersWorkspace's")
	}
	for _, path := range []string{"exec", "pty"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t)
			ws, edit := rootWorkspace(f)
			steps := []step{
				deny("chmod", edit, "4755"),
				deny("chmod", edit, "2755"),
				deny("chmod", ws, "2700"),
				deny("create-mode", ws+"/suid", "4755"),
				deny("mkdir-mode", ws+"/sgid", "2755"),
				deny("openat2-create", ws+"/via-openat2"),
				deny("setcap", edit),
				allow("chmod", edit, "755"),
				allow("create-mode", ws+"/plain", "755"),
			}
			var args []string
			for _, s := range steps {
				args = append(args, s.args...)
			}
			s := run(t, probeStart(path == "pty", fsPolicy(list(ws), nil, nil), nil, args...), nil)
			exitedCleanly(t, s)
			checkSteps(t, steps, s.outcomes, s.String())
			filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					t.Error(err)
					return nil
				}
				fi, err := os.Lstat(p)
				if err != nil {
					t.Error(err)
					return nil
				}
				if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
					t.Errorf("host %s has mode %v", p, fi.Mode())
				}
				if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
					t.Errorf("host %s is owned by %d, want root's", p, st.Uid)
				}
				return nil
			})
			for _, p := range []string{ws + "/suid", ws + "/sgid", ws + "/via-openat2"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("host %s exists", p)
				}
			}
			recordedDenials(t, s.res.SessionID,
				denialWant{field: "filesystem.write", operation: "fchmodat", target: edit, errno: "EPERM", needDetail: true},
				denialWant{field: "filesystem.write", operation: "openat", target: ws + "/suid", errno: "EPERM"},
				denialWant{field: "filesystem.write", operation: "mkdirat", target: ws + "/sgid", errno: "EPERM"},
				denialWant{field: "filesystem.write", operation: "openat2", errno: "ENOSYS"},
				denialWant{field: "filesystem.write", operation: "setxattr", target: edit, errno: "EPERM", detail: "security.capability"})
		})
	}
}
