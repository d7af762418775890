//go:build linux || darwin

package conformance

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// probeTime is what the probe's utimes sets.
var probeTime = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// inodeMeta is what a metadata call may change of an inode, as the host
// sees it.
type inodeMeta struct {
	mode     uint32
	uid, gid uint32
	mtime    int64
	size     int64
	// linux holds what only Linux has: extended attributes and inode
	// flags.
	linux string
}

func (m inodeMeta) String() string {
	return fmt.Sprintf("mode %o owner %d:%d mtime %d size %d %s", m.mode, m.uid, m.gid, m.mtime, m.size, m.linux)
}

func hostMeta(t *testing.T, path string) inodeMeta {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("host: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return inodeMeta{mode: uint32(st.Mode), uid: st.Uid, gid: st.Gid, mtime: fi.ModTime().Unix(), size: fi.Size(), linux: linuxMeta(t, path)}
}

// sameMeta fails the test when the host's metadata of path is no longer
// before.
func sameMeta(t *testing.T, path string, before inodeMeta) {
	t.Helper()
	if now := hostMeta(t, path); now != before {
		t.Errorf("host %s changed: %v, was %v", path, now, before)
	}
}

// notRealMeta fails the test when a step that looked at a deny path
// succeeded with the real metadata: a mask's may show, the real may not.
func notRealMeta(t *testing.T, o outcome, real inodeMeta) {
	t.Helper()
	if o.OK && o.detail() == fmt.Sprintf("mode=%o size=%d mtime=%d", real.mode, real.size, real.mtime) {
		t.Errorf("%s showed the deny path's real metadata", o)
	}
}

func metadataCases() []conformanceCase {
	return []conformanceCase{
		{name: "cannot change mode, owner or times outside write roots", setup: func(f *fixture) spec {
			w := f.mkdir("w")
			in := f.file("w/file", "mine\n")
			o := f.file("outside/file", "host\n")
			od := f.mkdir("outside/dir")
			before, beforeDir := hostMeta(f.t, o), hostMeta(f.t, od)
			return spec{
				policy: fsPolicy(list(w), nil, nil),
				steps: []step{
					deny("chmod", o, "4755"),
					deny("chmod", od, "777"),
					deny("chown", o),
					deny("utimes", o),
					deny("utimes", od),
					allow("chmod", in, "600"),
					allow("chown", in),
					allow("utimes", in),
				},
				after: func(t *testing.T, s *session) {
					sameMeta(t, o, before)
					sameMeta(t, od, beforeDir)
					if m := hostMeta(t, in); m.mode&0o7777 != 0o600 || m.mtime != probeTime.Unix() {
						t.Errorf("inside the write root: %v, want mode 600 and mtime %d", m, probeTime.Unix())
					}
					metaDenials(t, s, denialWant{field: "filesystem.write", target: o}, denialWant{field: "filesystem.write", target: od})
				},
			}
		}},
		{name: "cannot change metadata of read-only carve-out", landlockRefuses: "filesystem.read_only", setup: func(f *fixture) spec {
			w := f.mkdir("w")
			cfg := f.file("w/.git/config", "[core]\n")
			before, beforeDir := hostMeta(f.t, cfg), hostMeta(f.t, w+"/.git")
			return spec{
				policy: fsPolicy(list(w), list(w+"/.git"), nil),
				steps: []step{
					deny("chmod", cfg, "666"),
					deny("chmod", w+"/.git", "777"),
					deny("utimes", cfg),
					deny("chown", cfg),
					allow("utimes", w),
				},
				after: func(t *testing.T, s *session) {
					sameMeta(t, cfg, before)
					sameMeta(t, w+"/.git", beforeDir)
					metaDenials(t, s, denialWant{field: "filesystem.read_only", target: cfg})
				},
			}
		}},
		{name: "deny path is neither changed nor seen", setup: func(f *fixture) spec {
			ssh := f.mkdir("home/.ssh")
			key := f.file("home/.ssh/id_rsa", "PRIVATE KEY\n")
			if err := os.Chmod(key, 0o600); err != nil {
				f.t.Fatal(err)
			}
			f.symlink("home/.ssh/link", "id_rsa")
			token := f.file("home/token", "TOKEN\n")
			w := f.mkdir("w")
			f.symlink("w/to-key", key)
			before, beforeToken := hostMeta(f.t, key), hostMeta(f.t, token)
			return spec{
				policy: fsPolicy(list(w), nil, list(ssh, token)),
				steps: []step{
					deny("chmod", key, "644"),
					deny("chown", key),
					deny("utimes", key),
					deny("stat", key),
					deny("access", key),
					deny("readlink", ssh+"/link"),
					deny("access", w+"/to-key"),
					// Relative to the working directory, "/".
					deny("stat", strings.TrimPrefix(key, "/")),
					deny("access", w+"/../home/.ssh/id_rsa"),
					deny("chmod", token, "644"),
					deny("utimes", token),
					// A mask may stand where the path is: its own
					// metadata may show, never the real.
					prepare("stat", token),
					prepare("stat", ssh),
				},
				after: func(t *testing.T, s *session) {
					sameMeta(t, key, before)
					sameMeta(t, token, beforeToken)
					notRealMeta(t, s.outcomes[11], beforeToken)
					metaDenials(t, s, denialWant{field: "filesystem.deny", target: key}, denialWant{field: "filesystem.deny", target: token})
				},
			}
		}},
	}
}
