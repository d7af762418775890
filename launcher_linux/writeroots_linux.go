package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"golang.org/x/sys/unix"
)

// hostOwner says whose path is on the host and its mode, for a refusal to
// name; what the sandbox sees may be an unmapped owner's overflow uid.
func hostOwner(path string) (desc string, uid uint32, ok bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "", 0, false
	}
	desc = fmt.Sprintf("owner %d, mode %04o", st.Uid, st.Mode&0o7777)
	if st.Uid == overflowUID() && !inInitialUserNS() {
		desc += "; its owner is not mapped in the daemon's own user namespace"
	}
	return desc, st.Uid, true
}

// overflowUID is the uid the kernel shows for an owner a user namespace
// does not map.
var overflowUID = sync.OnceValue(func() uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
})

// inInitialUserNS reports whether the daemon runs in the host's own user
// namespace, where every uid is what it is.
var inInitialUserNS = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	return err == nil && strings.Join(strings.Fields(string(b)), " ") == "0 0 4294967295"
})

// identityRemedies are what lets the sandbox uid use path when it may
// not: the path handed to it (when chown), a sandbox uid that already may,
// or a caller whose sandbox runs as the owner.
func identityRemedies(path string, owner, uid, gid uint32, ancestor, chown bool) []string {
	var out []string
	switch {
	case ancestor:
		out = append(out, fmt.Sprintf("let uid %d search %s (chmod o+x), or move the directory somewhere it can reach", uid, path))
	case chown:
		out = append(out, fmt.Sprintf("chown -R %d:%d %s", uid, gid, path))
	}
	if os.Geteuid() == 0 && owner != 0 && owner != uid {
		out = append(out,
			fmt.Sprintf("start sandboxd with --sandbox-uid %d, its owner", owner),
			fmt.Sprintf("call the daemon as uid %d: a non-root caller's sandbox runs as the caller", owner))
	}
	return out
}

// unusableWriteRoot is the refusal of a write root that the init, as the
// command will be, found it cannot write: a grant that does nothing must
// not look like one. note says more where the backend looked at the root
// before (see idmapPlan); remedy is the set's way out.
func unusableWriteRoot(m sandboxinit.Message, uid, gid uint32, note rootNote, remedy string) *launcher.Unenforceable {
	blocker := m.Blocker
	if blocker == "" {
		blocker = m.Path
	}
	ancestor := blocker != m.Path
	u := &launcher.Unenforceable{
		Field:     m.Field,
		Mechanism: fmt.Sprintf("write access to %s for the sandbox uid %d", m.Path, uid),
		Errno:     syscall.Errno(m.Errno),
		Probe:     "access " + blocker,
	}
	desc, owner, ok := hostOwner(blocker)
	if !ok {
		desc = "not found on the host"
	}
	switch {
	case ancestor:
		u.Found = fmt.Sprintf("%s, on the way to %s (%s), may not be searched by uid %d", blocker, m.Path, desc, uid)
	default:
		u.Found = fmt.Sprintf("%s (%s) is not writable by uid %d", blocker, desc, uid)
	}
	if note.why != "" && !ancestor {
		u.Found += "; " + note.why
	}
	if note.remedy != "" && !ancestor {
		remedy = note.remedy
	}
	u.Remedy = joinRemedies(identityRemedies(blocker, owner, uid, gid, ancestor, !note.noChown), remedy)
	return u
}

// unusableCwd is the failure of a working directory the command may not
// enter; the bare EACCES of its execve would name the program instead.
func unusableCwd(m sandboxinit.Message, uid, gid uint32, more ...string) *launcher.ExecError {
	e := &launcher.ExecError{Op: m.Op, Path: m.Path, Errno: syscall.Errno(m.Errno)}
	if !errors.Is(e.Errno, syscall.EACCES) && !errors.Is(e.Errno, syscall.EPERM) {
		return e
	}
	blocker := m.Blocker
	if blocker == "" {
		blocker = m.Path
	}
	desc, owner, ok := hostOwner(blocker)
	if !ok {
		desc = "not found on the host"
	}
	if blocker == m.Path {
		e.Reason = fmt.Sprintf("cwd %s is not accessible to the sandbox uid %d (%s)", m.Path, uid, desc)
	} else {
		e.Reason = fmt.Sprintf("cwd %s is not accessible to the sandbox uid %d: %s (%s) may not be searched", m.Path, uid, blocker, desc)
	}
	e.Reason += "; remedy: " + joinRemedies(identityRemedies(blocker, owner, uid, gid, blocker != m.Path, true), more...)
	return e
}

// idmapShortfall says why this backend cannot map a write root's owner to
// the sandbox uid for a launch on set, and what would let it; "" when it
// can.
func idmapShortfall(set MechanismSet) (why, remedy string) {
	switch {
	case set == SetLandlock:
		return "the landlock set has no mount namespace in which to map its owner to the sandbox uid",
			"allow user namespaces, so that the namespaces set maps a write root's owner to the sandbox uid"
	case os.Geteuid() != 0:
		return "only a root daemon can map a write root's owner to the sandbox uid",
			"run sandboxd as root, which maps a write root's owner to the sandbox uid"
	}
	return "", ""
}

// joinRemedies joins the remedies that are not empty as alternatives.
func joinRemedies(list []string, more ...string) string {
	var out []string
	for _, s := range append(list, more...) {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; or ")
}
