package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockABI asks the kernel which Landlock ABI it offers; 0 when none.
func LandlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// rulesetAttr is struct landlock_ruleset_attr up to the scoped field (ABI 6);
// the kernel accepts the shorter sizes of older ABIs.
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// ApplyLandlock restricts the calling thread, which must be locked and must
// be the one that calls execve.
func ApplyLandlock(p LandlockPlan) error {
	if p.ABI <= 0 {
		return nil
	}
	attr := rulesetAttr{handledFS: p.HandledFS, scoped: p.Scoped}
	size := unsafe.Sizeof(attr)
	if p.ABI < 6 {
		size = 16
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, r := range p.Rules {
		if err := addLandlockRule(int(fd), r); err != nil {
			return err
		}
	}
	if len(p.ReadExcept) > 0 {
		if err := grantExcept(int(fd), "/", p.ReadAccess, p.ReadExcept, p.Strict); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// grantExcept grants access beneath each entry of dir, descending into the
// entries that lead to an excepted path and skipping the excepted ones.
func grantExcept(ruleset int, dir string, access uint64, except []string, strict bool) error {
	names, err := readDirNames(dir)
	if errors.Is(err, unix.EACCES) {
		if unix.Access(dir, unix.X_OK) != nil {
			// Not searchable: nothing beneath is reachable anyway.
			return nil
		}
		// Searchable but not listable: the entries cannot be granted one
		// by one, so the directory is granted whole and the excepted path
		// beneath it rests on the mount layer alone, if there is one.
		if strict {
			return fmt.Errorf("landlock: cannot list %s to keep a deny path beneath it unreadable: %w", dir, err)
		}
		return addLandlockRule(ruleset, LandlockRule{Path: dir, Access: access})
	}
	if err != nil {
		return fmt.Errorf("landlock: list %s: %w", dir, err)
	}
	for _, name := range names {
		p := path.Join(dir, name)
		switch leadsTo(p, except) {
		case exceptExact:
		case exceptBeneath:
			if err := grantExcept(ruleset, p, access, except, strict); err != nil {
				return err
			}
		default:
			// A symlink's inode grants nothing; following it here could
			// grant the tree an excepted path lives in.
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink != 0 {
				continue
			}
			if err := addLandlockRule(ruleset, LandlockRule{Path: p, Access: access}); err != nil {
				return err
			}
		}
	}
	return nil
}

const (
	exceptNone = iota
	exceptExact
	exceptBeneath
)

func leadsTo(p string, except []string) int {
	found := exceptNone
	for _, e := range except {
		if e == p {
			return exceptExact
		}
		if strings.HasPrefix(e, p+"/") {
			found = exceptBeneath
		}
	}
	return found
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func addLandlockRule(ruleset int, r LandlockRule) error {
	pfd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// A granted path that does not exist grants nothing.
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock rule %s: %w", r.Path, err)
	}
	defer unix.Close(pfd)
	access := r.Access
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("landlock rule %s: %w", r.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= LLFileRights
	}
	pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
	runtime.KeepAlive(pb)
	if errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", r.Path, errno)
	}
	return nil
}

// ApplySeccomp installs prog on the calling thread; no_new_privs must be
// set. With listener it returns the fd on which the filter's user
// notifications arrive, -1 otherwise.
func ApplySeccomp(prog []SockFilter, listener bool) (int, error) {
	if len(prog) == 0 {
		// Only the namespaces set plans no filter, on a host without
		// seccomp, for policies no field of which rests on it.
		return -1, nil
	}
	filters := make([]unix.SockFilter, len(prog))
	for i, f := range prog {
		filters[i] = unix.SockFilter{Code: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	flags := uintptr(0)
	if listener {
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filters)
	if errno != 0 {
		return -1, fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	if !listener {
		return -1, nil
	}
	return int(r), nil
}

// LoopbackUp brings lo up in the sandbox's network namespace; the kernel
// assigns 127.0.0.1 and ::1 itself.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}
