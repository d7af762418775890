package launcherlinux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"syscall"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"golang.org/x/sys/unix"
)

func TestMissingWriteRootIsRefusedAsSuch(t *testing.T) {
	missing := hostDir(t, 0o755) + "/not-made"
	_, err := newBackend(t).Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{missing}}}, "/bin/true"))
	var fe *policy.FieldError
	if !errors.As(err, &fe) || fe.Field != "filesystem.write[0]" {
		t.Fatalf("Start = %v, want a FieldError naming filesystem.write[0]", err)
	}
	if want := missing + " does not exist; create it first"; fe.Msg != want {
		t.Errorf("message %q, want %q", fe.Msg, want)
	}
	if strings.Contains(err.Error(), "lstat") {
		t.Errorf("message %q shows the lstat behind it", err)
	}
}

// A write root the sandbox uid may not write is refused, on every set,
// naming the root, its owner and mode, the uid and a remedy; so is a cwd
// it may not enter, instead of an execve error that blames the command.
func TestUnusableWriteRootAndCwdAreRefused(t *testing.T) {
	for _, set := range []MechanismSet{SetNamespaces, SetLandlock} {
		t.Run(string(set), func(t *testing.T) {
			b := backendFor(t, set)
			uid, _ := sandboxIdentity()
			// No write bit for anyone: neither the sandbox uid nor an
			// owner mapped to it may write here.
			w := hostDir(t, 0o555)
			p, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/true"))
			wantRefusal(t, p, err, "filesystem.write")
			for _, want := range []string{w, fmt.Sprintf("uid %d", uid), fmt.Sprintf("owner %d, mode 0555", os.Geteuid()), "remedy: chown -R"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}

			private := hostDir(t, 0o700)
			if err := os.Chown(private, 0, 0); err != nil && os.Geteuid() == 0 {
				t.Fatal(err)
			}
			if os.Geteuid() != 0 {
				// The test's own uid is the sandbox's: take its search
				// right away instead.
				if err := os.Chmod(private, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec := testSpec(t, nil, "/bin/true")
			spec.Cwd = private
			p, err = b.Start(context.Background(), spec)
			var ee *launcher.ExecError
			if !errors.As(err, &ee) {
				if err == nil {
					p.Kill()
					p.Wait()
				}
				t.Fatalf("Start in cwd %s = %v, want an ExecError", private, err)
			}
			mode := "0700"
			if os.Geteuid() != 0 {
				mode = "0600"
			}
			want := fmt.Sprintf("cwd %s is not accessible to the sandbox uid %d (owner %d, mode %s)", private, uid, os.Geteuid(), mode)
			if !strings.HasPrefix(err.Error(), want) || ee.ExitCode() != 126 {
				t.Errorf("Start in cwd %s = %q (exit %d), want %q... (exit 126)", private, err, ee.ExitCode(), want)
			}
		})
	}
}

// A root caller's workspace, root-owned and private, is writable by the
// sandbox through an ID-mapped bind, and what the sandbox makes there is
// root's on the host, with the modes it asked for.
func TestRootOwnedWriteRootIsIdmapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ID-mapped write roots are a root daemon's: only root may map a filesystem's owners")
	}
	w := hostDir(t, 0o700)
	if err := os.WriteFile(w+"/edit", []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `set -e; cd "$1"
test "$(stat -c %u:%g .)" = 65533:65533
echo new > created; echo after > edit; mkdir dir; mv created dir/moved
touch gone; rm gone; chmod 0640 edit; echo ok`
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/sh", "-c", script, "sh", w)
	// Not for anyone else's caller: the sandbox must not write a root the
	// caller could not.
	_, err := newBackend(t).Start(context.Background(), spec)
	wantRefusal(t, nil, err, "filesystem.write")
	if !strings.Contains(err.Error(), "the caller is not root") {
		t.Errorf("refusal %q does not say why it was not mapped", err)
	}
	spec.RootCaller = true
	out, serr, _, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("status %+v (%v), stdout %q, stderr %q", st, err, out, serr)
	}
	for name, mode := range map[string]os.FileMode{"edit": 0o640, "dir": os.ModeDir | 0o755, "dir/moved": 0o644} {
		var st unix.Stat_t
		if err := unix.Lstat(w+"/"+name, &st); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(w + "/" + name)
		if st.Uid != 0 || st.Gid != 0 || fi.Mode() != mode {
			t.Errorf("%s on the host: uid %d gid %d mode %v, want 0 0 %v", name, st.Uid, st.Gid, fi.Mode(), mode)
		}
	}
	if b, _ := os.ReadFile(w + "/edit"); string(b) != "after\n" {
		t.Errorf("edit holds %q, want the sandbox's edit", b)
	}
	if _, err := os.Lstat(w + "/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone: %v, want it removed", err)
	}

	// Mapped, a root whose mode shuts out even its owner is still shut,
	// and the refusal says what opens it.
	shut := hostDir(t, 0o555)
	shutSpec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{shut}}}, "/bin/true")
	shutSpec.RootCaller = true
	p, err := newBackend(t).Start(context.Background(), shutSpec)
	wantRefusal(t, p, err, "filesystem.write")
	if !strings.Contains(err.Error(), "remedy: chmod u+wx "+shut) || strings.Contains(err.Error(), "chown") {
		t.Errorf("refusal %q, want the chmod that opens it and no chown", err)
	}

	// The landlock set cannot map it, and says so instead of granting
	// nothing.
	spec = testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/true")
	spec.RootCaller = true
	p, err = backendFor(t, SetLandlock).Start(context.Background(), spec)
	wantRefusal(t, p, err, "filesystem.write")
	if !strings.Contains(err.Error(), "no mount namespace") {
		t.Errorf("refusal %q does not say why the landlock set cannot map it", err)
	}
}

// A caller that is not root gets back, through the mapping, the group it
// writes a root with, which its sandbox (its primary group alone) lacks;
// what the sandbox makes there is the caller's and that group's.
func TestCallersGroupWriteRootIsIdmapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ID-mapped write roots are a root daemon's: only root may map a filesystem's owners")
	}
	const team = 4343
	w := hostDir(t, 0o770)
	if err := os.Chown(w, 0, team); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/sh", "-c", `echo x > "$1/made"`, "sh", w)
	p, err := newBackend(t).Start(context.Background(), spec)
	wantRefusal(t, p, err, "filesystem.write")
	spec.CallerGroups = []uint32{spec.GID, team}
	_, serr, _, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v (%v), stderr %q", st, err, serr)
	}
	var made unix.Stat_t
	if err := unix.Lstat(w+"/made", &made); err != nil || made.Uid != spec.UID || made.Gid != team {
		t.Errorf("made on the host: %v, owner %d:%d; want %d:%d", err, made.Uid, made.Gid, spec.UID, team)
	}
}

// A carve-out inside an ID-mapped root that does not exist yet is made
// through the mapping, so the sandbox cannot make it writable first.
func TestCarveOutInsideIdmappedRootIsHeld(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ID-mapped write roots are a root daemon's: only root may map a filesystem's owners")
	}
	w := hostDir(t, 0o700)
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, ReadOnly: []string{w + "/.git"}}},
		"/bin/sh", "-c", `mkdir -p "$1/.git"; touch "$1/.git/x" || exit 3; exit 0`, "sh", w)
	spec.RootCaller = true
	_, serr, _, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 3 {
		t.Errorf("writing into the read-only carve-out: status %+v, stderr %q; want it refused", st, serr)
	}
	if _, err := os.Lstat(w + "/.git/x"); err == nil {
		t.Error("the sandbox wrote into the read-only carve-out")
	}
}

// The sandbox uid has a name inside, the host's or "sandbox".
func TestSandboxUIDHasAName(t *testing.T) {
	uid, gid := sandboxIdentity()
	want := "sandbox sandbox"
	if u, err := user.LookupId(fmt.Sprint(uid)); err == nil {
		want = u.Username
		if g, err := user.LookupGroupId(fmt.Sprint(gid)); err == nil {
			want += " " + g.Name
		}
	}
	out, serr, st := run(t, nil, "/bin/sh", "-c", `echo "$(id -un) $(id -gn)"`)
	if got := strings.TrimSpace(out); st.ExitCode != 0 || got != want {
		t.Errorf("id -un, id -gn: %q (status %+v, stderr %q), want %q", got, st, serr, want)
	}
}

// Only roots the sandbox uid could not write are mapped, only for a root
// caller on the namespaces set, and never one holding the host's own
// trees.
func TestIdmapPlanMapsOnlyWhatItMust(t *testing.T) {
	const uid, gid = 4242424, 4242424 // owns nothing here
	private, open, readable := hostDir(t, 0o700), hostDir(t, 0o1777), hostDir(t, 0o755)
	writes := []string{"/", "/etc", "/var", private, open, readable}
	mapped, _, notes := idmapPlan(writes, SetNamespaces, identity{uid: uid, gid: gid, rootCaller: true})
	if os.Geteuid() != 0 {
		// Only root may map a filesystem's owners.
		if len(mapped) != 0 {
			t.Errorf("a rootless daemon mapped %q", mapped)
		}
	} else {
		if want := []string{private, readable}; !slices.Equal(mapped, want) {
			t.Errorf("mapped %q, want %q", mapped, want)
		}
		for _, w := range []string{"/etc", "/var"} {
			if n := notes[w]; !n.noChown || !strings.Contains(n.why, "host's own files") {
				t.Errorf("note for %s: %+v, want it kept unmapped as a host tree", w, n)
			}
		}
	}
	if _, ok := notes["/"]; ok {
		t.Error(`"/" got a note; it is no root the sandbox must be able to write`)
	}
	for name, who := range map[string]identity{
		"landlock set":    {uid: uid, gid: gid, rootCaller: true},
		"non-root caller": {uid: uid, gid: gid, groups: []uint32{gid, 4343}},
	} {
		set := SetNamespaces
		if name == "landlock set" {
			set = SetLandlock
		}
		if got, _, _ := idmapPlan(writes, set, who); len(got) != 0 {
			t.Errorf("%s: mapped %q, want nothing", name, got)
		}
	}
}

func TestSwappedTradesTwoIDsAndKeepsTheRest(t *testing.T) {
	at := func(m []syscall.SysProcIDMap, id int) int {
		for _, e := range m {
			if id >= e.ContainerID && id < e.ContainerID+e.Size {
				return e.HostID + id - e.ContainerID
			}
		}
		return -1
	}
	for _, c := range [][2]uint32{{0, 65533}, {65533, 0}, {4343, 1000}, {7, 7}} {
		m := swapped(c[0], c[1])
		want := map[int]int{int(c[0]): int(c[1]), int(c[1]): int(c[0])}
		for _, id := range []int{0, 1, 999, 1000, 1001, 4343, 65532, 65533, 65534, 1<<32 - 2} {
			w, ok := want[id]
			if !ok {
				w = id
			}
			if got := at(m, id); got != w {
				t.Errorf("swapped(%d, %d) maps %d to %d, want %d", c[0], c[1], id, got, w)
			}
		}
	}
}
