package launcherlinux

import (
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// Names the judgement is told about: what exists, of which type.
func missing(p string) namedPath { return namedPath{Path: p, ParentExists: true} }
func file(p string) namedPath {
	return namedPath{Path: p, Exists: true, Type: modeReg, ParentExists: true}
}
func dir(p string) namedPath {
	return namedPath{Path: p, Exists: true, Type: modeDir, ParentExists: true}
}
func device(p string) namedPath {
	return namedPath{Path: p, Exists: true, Type: modeChr, ParentExists: true}
}
func onMount(np namedPath, parent uint64) namedPath {
	np.ParentMount = parent
	return np
}

func open(flags uint64, t namedPath) *writeCall {
	return &writeCall{Op: "openat", Kind: writeOpen, Flags: flags, Target: t}
}

func modelOf(t *testing.T, pol *sandboxdv1.Policy, host Host) *WriteModel {
	t.Helper()
	plan, err := BuildPlan(launcher.PlanRequest{Policy: policy.Normalize(pol), Argv: []string{"sh"}, UID: 1000, GID: 1000, HideSockets: []string{"/run/sandboxd/sandboxd.sock"}}, host)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Supervise == nil {
		t.Fatal("no supervision planned on a host with user notification")
	}
	return plan.Supervise.Writes
}

// judged is a judgement as "FIELD ERRNO PATH", "" for none.
func judged(m *WriteModel, c *writeCall) string {
	r := m.judge(c)
	if r == nil {
		return ""
	}
	return strings.Join([]string{r.Field, r.Errno, r.Path}, " ")
}

func TestWriteModelOfNamespaces(t *testing.T) {
	const (
		wr, trunc, creat, excl = 0x1, 0x200, 0x40, 0x80
		rdwr                   = 0x2
	)
	m := modelOf(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{"/work"},
		ReadOnly: []string{"/work/.git", "/work/a/b/.agent"},
		Deny:     []string{"/home/u/.ssh", "/home/u/.netrc", "/work/.env"},
	}}, fakeHost(7, []string{"/work", "/work/.git", "/home/u/.ssh", "/work/a/b/.agent"}, []string{"/home/u/.netrc", "/run/sandboxd/sandboxd.sock"}))
	for _, c := range []struct {
		name string
		call *writeCall
		want string
	}{
		{"create outside the write roots", open(wr|creat, missing("/etc/x")), "filesystem.write EROFS /etc/x"},
		{"create in a write root", open(wr|creat, missing("/work/x")), ""},
		{"create in a carve-out", open(wr|creat, missing("/work/.git/x")), "filesystem.read_only EROFS /work/.git/x"},
		{"create without O_CREAT", open(wr, missing("/etc/x")), ""},
		{"create where the directory is missing", open(wr|creat, namedPath{Path: "/etc/nodir/x"}), ""},
		{"create, excluding, what exists", open(wr|creat|excl, file("/etc/passwd")), ""},
		{"write a masked file", open(wr, file("/home/u/.netrc")), "filesystem.deny EACCES /home/u/.netrc"},
		{"truncate a masked file", open(wr|trunc, file("/home/u/.netrc")), "filesystem.deny EROFS /home/u/.netrc"},
		{"create beneath a masked directory", open(wr|creat, missing("/home/u/.ssh/id")), "filesystem.deny EACCES /home/u/.ssh/id"},
		{"beneath a masked directory, nothing beyond looked up", open(wr|creat, namedPath{Path: "/home/u/.ssh/d/id"}), "filesystem.deny EACCES /home/u/.ssh/d/id"},
		{"read-write open of a file of the read-only root", open(rdwr, file("/etc/passwd")), "filesystem.write EROFS /etc/passwd"},
		{"open a directory for writing", open(wr, dir("/etc")), ""},
		{"write a device", open(wr, device("/dev/null")), ""},
		{"create in /dev, which Landlock keeps", open(wr|creat, missing("/dev/x")), "filesystem.write EACCES /dev/x"},
		{"write what /proc keeps read-only", open(wr, file("/proc/sys/kernel/hostname")), "process EROFS /proc/sys/kernel/hostname"},
		{"write the sandbox's own /proc", open(wr, file("/proc/2/oom_score_adj")), ""},
		{"create in the private /tmp", open(wr|creat, missing("/tmp/x")), ""},
		{"create in /dev/shm", open(wr|creat, missing("/dev/shm/x")), ""},
		{"unnamed file outside the write roots", open(0x410000|wr, dir("/etc")), "filesystem.write EROFS /etc"},
		{"unnamed file in a write root", open(0x410000|wr, dir("/work")), ""},
		{"mkdir what exists", &writeCall{Kind: writeMake, Mode: modeDir, Target: dir("/work/.git")}, ""},
		{"mkdir in a pinned ancestor", &writeCall{Kind: writeMake, Mode: modeDir, Target: missing("/work/a/x")}, ""},
		{"symlink outside", &writeCall{Kind: writeMake, Mode: modeLnk, Target: missing("/etc/l")}, "filesystem.write EROFS /etc/l"},
		{"truncate outside", &writeCall{Kind: writeTruncate, Target: file("/etc/hostname")}, "filesystem.write EROFS /etc/hostname"},
		{"truncate inside", &writeCall{Kind: writeTruncate, Target: file("/work/f")}, ""},
		{"unlink outside", &writeCall{Kind: writeUnlink, Target: file("/etc/passwd")}, "filesystem.write EROFS /etc/passwd"},
		{"unlink what is not there, outside", &writeCall{Kind: writeUnlink, Target: missing("/etc/nothing")}, "filesystem.write EROFS /etc/nothing"},
		{"unlink what is not there, inside", &writeCall{Kind: writeUnlink, Target: missing("/work/nothing")}, ""},
		{"rmdir a file", &writeCall{Kind: writeRmdir, Target: file("/work/f")}, ""},
		{"rmdir a deny placeholder", &writeCall{Kind: writeRmdir, Target: dir("/work/.env")}, "filesystem.deny EBUSY /work/.env"},
		{"rename a carve-out", &writeCall{Kind: writeRename, Source: dir("/work/.git"), Target: missing("/work/g2")}, "filesystem.read_only EBUSY /work/.git"},
		{"rename a carve-out's ancestor", &writeCall{Kind: writeRename, Source: dir("/work/a"), Target: missing("/work/z")}, "filesystem.read_only EBUSY /work/a"},
		{"rename within the write root", &writeCall{Kind: writeRename, Source: file("/work/f"), Target: missing("/work/a/g")}, ""},
		{"rename across mounts", &writeCall{Kind: writeRename, Source: onMount(file("/work/f"), 10), Target: onMount(missing("/etc/f"), 11)}, ""},
		{"rename outside", &writeCall{Kind: writeRename, Source: onMount(file("/etc/a"), 11), Target: onMount(missing("/etc/b"), 11)}, "filesystem.write EROFS /etc/a"},
		{"rename over what exists, refusing to replace", &writeCall{Kind: writeRename, Flags: renameNoReplace, Source: file("/work/f"), Target: file("/work/.git")}, ""},
		{"link out of the write root", &writeCall{Kind: writeLink, Source: file("/work/f"), Target: missing("/etc/hl")}, "filesystem.write EROFS /etc/hl"},
		{"link in the write root", &writeCall{Kind: writeLink, Source: file("/work/f"), Target: missing("/work/hl")}, ""},
		{"link into a carve-out", &writeCall{Kind: writeLink, Source: file("/work/f"), Target: missing("/work/.git/hl")}, "filesystem.read_only EROFS /work/.git/hl"},
	} {
		if got := judged(m, c.call); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestWriteModelOfLandlockSet(t *testing.T) {
	host := fakeHost(7, []string{"/work", "/home/u/.ssh"}, nil)
	host.Set = SetLandlock
	m := modelOf(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/work"}, Deny: []string{"/home/u/.ssh"}}}, host)
	if len(m.Mounts) != 0 {
		t.Errorf("the landlock set has mounts of its own: %v", m.Mounts)
	}
	withTTY := m.withTerminal("/dev/pts/3")
	for _, c := range []struct {
		name string
		m    *WriteModel
		call *writeCall
		want string
	}{
		{"create outside", m, open(0x41, missing("/etc/x")), "filesystem.write EACCES /etc/x"},
		{"create inside", m, open(0x41, missing("/work/x")), ""},
		{"write a granted device", m, open(0x1, device("/dev/null")), ""},
		{"write another device", m, open(0x1, device("/dev/sda")), "filesystem.write EACCES /dev/sda"},
		{"create in a deny path", m, open(0x41, missing("/home/u/.ssh/x")), "filesystem.deny EACCES /home/u/.ssh/x"},
		{"the session's terminal, not planned", m, open(0x2, device("/dev/pts/3")), "filesystem.write EACCES /dev/pts/3"},
		{"the session's terminal", withTTY, open(0x2, device("/dev/pts/3")), ""},
		{"another terminal", withTTY, open(0x2, device("/dev/pts/4")), "filesystem.write EACCES /dev/pts/4"},
		{"rename out of the write root", m, &writeCall{Kind: writeRename, Source: file("/work/f"), Target: missing("/etc/f")}, "filesystem.write EACCES /etc/f"},
		{"rename into the write root", m, &writeCall{Kind: writeRename, Source: file("/etc/f"), Target: missing("/work/f")}, "filesystem.write EACCES /etc/f"},
		{"rename within the write root", m, &writeCall{Kind: writeRename, Source: file("/work/f"), Target: missing("/work/d/f")}, ""},
	} {
		if got := judged(c.m, c.call); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Sessions under one policy judge against one model, kept while some
// session uses it; a policy that differs in any path gets its own.
func TestWriteModelSharedBetweenEqualViews(t *testing.T) {
	host := fakeHost(7, []string{"/work", "/work/.git", "/w2"}, nil)
	pol := func(root string) *sandboxdv1.Policy {
		return &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{root}, ReadOnly: []string{"/work/.git"}}}
	}
	a, b := modelOf(t, pol("/work"), host), modelOf(t, pol("/work"), host)
	if a != b {
		t.Errorf("two sessions of one policy hold two write models")
	}
	c := modelOf(t, pol("/w2"), host)
	if c == a {
		t.Fatalf("a policy writing /w2 shares the model of one writing /work")
	}
	if got := judged(c, open(0x1|0x40, missing("/work/x"))); got != "filesystem.write EROFS /work/x" {
		t.Errorf("under the /w2 policy, creating /work/x: got %q, want it refused", got)
	}
	if got := judged(a, open(0x1|0x40, missing("/work/x"))); got != "" {
		t.Errorf("under the /work policy, creating /work/x: got %q, want it allowed", got)
	}
}
