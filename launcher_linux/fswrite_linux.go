package launcherlinux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/unix"
)

// judgeWrite reads the write-intent call of n, resolves its names as the
// sandbox sees them and judges it against the plan: the record of the
// refusal the call is about to meet, nil when it meets none or when that
// cannot be told (the record is then missing, never wrong on purpose).
// With lookups, a name that resolves beneath a deny path is refused by
// the daemon: denied is set, and the record says so.
func (s *supervisor) judgeWrite(n *seccompNotif) (d *sandboxdv1.Denial, denied bool) {
	v := &sandboxView{root: s.root, tid: int(n.Pid)}
	if s.lookups {
		v.deny = s.writes.Deny
	}
	c, err := v.readCall(n)
	var dp *deniedPath
	if errors.As(err, &dp) {
		return &sandboxdv1.Denial{Field: "filesystem.deny", Operation: writeCallNames()[n.Data.Nr], Target: dp.path, Errno: "EACCES"}, true
	}
	if err != nil || c == nil {
		return nil, false
	}
	r := s.writes.judge(c)
	if r == nil {
		return nil, false
	}
	return &sandboxdv1.Denial{Field: r.Field, Operation: c.Op, Target: r.Path, Errno: r.Errno}, false
}

// errno is what the daemon answers for r where it performs the call
// itself: EACCES where Landlock or a deny path refuses, else the read-only
// mounts' EROFS.
func (r *writeRefusal) errno() syscall.Errno {
	if r.Errno == "EACCES" {
		return unix.EACCES
	}
	return unix.EROFS
}

// sandboxView resolves the names one thread of the sandbox passes.
type sandboxView struct {
	// root is the sandbox's root directory: the same for every process
	// of it, as none may chroot or pivot_root.
	root int
	tid  int
	// args are the call's raw arguments, for the calls the daemon
	// performs.
	args [6]uint64
	// deny are the paths every lookup refuses to enter (lookupOpts.deny).
	deny []string
	// status is read on first need, for /proc/self.
	status *taskStatus
}

// nameArg is a name argument: the directory fd it is relative to and
// where the string is in the target's memory.
type nameArg struct {
	dirfd int32
	addr  uint64
}

const atFdcwd = int32(unix.AT_FDCWD)

// openHowSize is the size of struct open_how the kernel takes at least:
// flags, mode and resolve, each 64 bits.
const openHowSize = 24

// readCall decodes the arguments of n into the call the model judges; nil
// for a call whose arguments the kernel rejects before any check of the
// policy.
func (v *sandboxView) readCall(n *seccompNotif) (*writeCall, error) {
	a := n.Data.Args
	c := &writeCall{Op: writeCallNames()[n.Data.Nr]}
	var target, source nameArg
	o := lookupOpts{top: "/", deny: v.deny}
	followSource := false
	at := func(i int) nameArg { return nameArg{int32(a[i]), a[i+1]} }
	cwd := func(i int) nameArg { return nameArg{atFdcwd, a[i]} }
	switch n.Data.Nr {
	case nrOpen:
		c.Kind, c.Flags, target = writeOpen, uint64(uint32(a[1])), cwd(0)
	case nrOpenat:
		c.Kind, c.Flags, target = writeOpen, uint64(uint32(a[2])), at(0)
	case nrOpenat2:
		if a[3] < openHowSize {
			return nil, nil
		}
		how := make([]byte, openHowSize)
		if err := v.readMemory(a[2], how); err != nil {
			return nil, err
		}
		c.Kind, c.Flags, target = writeOpen, binary.NativeEndian.Uint64(how), at(0)
		o.resolve = binary.NativeEndian.Uint64(how[16:])
	case nrCreat:
		c.Kind, c.Flags, target = writeOpen, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, cwd(0)
	case nrTruncate:
		c.Kind, target = writeTruncate, cwd(0)
	case nrMkdir:
		c.Kind, c.Mode, target = writeMake, modeDir, cwd(0)
	case nrMkdirat:
		c.Kind, c.Mode, target = writeMake, modeDir, at(0)
	case nrMknod:
		c.Kind, c.Mode, target = writeMake, uint32(a[1]), cwd(0)
	case nrMknodat:
		c.Kind, c.Mode, target = writeMake, uint32(a[2]), at(0)
	case nrSymlink:
		c.Kind, c.Mode, target = writeMake, modeLnk, cwd(1)
	case nrSymlinkat:
		c.Kind, c.Mode, target = writeMake, modeLnk, nameArg{int32(a[1]), a[2]}
	case nrUnlink:
		c.Kind, target = writeUnlink, cwd(0)
	case nrRmdir:
		c.Kind, target = writeRmdir, cwd(0)
	case nrUnlinkat:
		c.Kind, target = writeUnlink, at(0)
		if a[2]&unix.AT_REMOVEDIR != 0 {
			c.Kind = writeRmdir
		}
	case nrRename:
		c.Kind, source, target = writeRename, cwd(0), cwd(1)
	case nrRenameat:
		c.Kind, source, target = writeRename, at(0), at(2)
	case nrRenameat2:
		c.Kind, source, target, c.Flags = writeRename, at(0), at(2), uint64(uint32(a[4]))
	case nrLink:
		c.Kind, source, target = writeLink, cwd(0), cwd(1)
	case nrLinkat:
		if a[4]&unix.AT_EMPTY_PATH != 0 {
			// Links an open file, which has no name to judge by.
			return nil, nil
		}
		c.Kind, source, target = writeLink, at(0), at(2)
		followSource = a[4]&unix.AT_SYMLINK_FOLLOW != 0
	default:
		return nil, nil
	}
	if c.Kind == writeMake && c.Mode&modeType == 0 {
		c.Mode |= modeReg
	}
	c.Mode &= modeType
	o.follow = c.Kind == writeTruncate ||
		c.Kind == writeOpen && c.Flags&unix.O_NOFOLLOW == 0 && c.Flags&(unix.O_CREAT|unix.O_EXCL) != unix.O_CREAT|unix.O_EXCL
	// Two names meet only on one mount.
	o.mounts = c.Kind == writeLink || c.Kind == writeRename
	var err error
	if c.Target, err = v.name(target, o); err != nil {
		return nil, err
	}
	if source.addr != 0 {
		o.follow, o.resolve = followSource, 0
		if c.Source, err = v.name(source, o); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// name reads and resolves one name argument.
func (v *sandboxView) name(arg nameArg, o lookupOpts) (namedPath, error) {
	name, err := v.readString(arg.addr)
	if err != nil {
		return namedPath{}, err
	}
	dir := ""
	if !path.IsAbs(name) || o.resolve&(unix.RESOLVE_IN_ROOT|unix.RESOLVE_BENEATH) != 0 {
		if dir, err = v.dirOf(arg.dirfd); err != nil {
			return namedPath{}, err
		}
	}
	return v.lookup(dir, name, o)
}

// readMemory fills b from the target's memory at addr.
func (v *sandboxView) readMemory(addr uint64, b []byte) error {
	n, err := unix.ProcessVMReadv(v.tid, []unix.Iovec{{Base: &b[0], Len: uint64(len(b))}}, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return unix.EFAULT
	}
	return nil
}

// readString reads the NUL-terminated string at addr as the kernel takes
// a path: at most PATH_MAX bytes with its NUL. It never reads across a page
// boundary in one go: a string that ends just before an unmapped page is
// as good to the daemon as to the kernel. The first read is short, as
// most paths are.
func (v *sandboxView) readString(addr uint64) (string, error) {
	page := uint64(os.Getpagesize())
	buf := make([]byte, 0, 256)
	for want := uint64(cap(buf)); len(buf) < unix.PathMax; want = page {
		chunk := min(want, page-addr%page, uint64(unix.PathMax-len(buf)))
		buf = slices.Grow(buf, int(chunk))
		b := buf[len(buf) : len(buf)+int(chunk)]
		n, err := unix.ProcessVMReadv(v.tid, []unix.Iovec{{Base: &b[0], Len: chunk}}, []unix.RemoteIovec{{Base: uintptr(addr), Len: int(chunk)}}, 0)
		if err != nil {
			return "", err
		}
		if i := bytes.IndexByte(b[:n], 0); i >= 0 {
			return string(buf[:len(buf)+i]), nil
		}
		if uint64(n) != chunk {
			return "", unix.EFAULT
		}
		buf = buf[:len(buf)+n]
		addr += chunk
	}
	return "", unix.ENAMETOOLONG
}

// errNotAPath is a directory fd or magic link that names no file of the
// sandbox's tree (a pipe, a socket, a deleted file).
var errNotAPath = errors.New("not a path in the sandbox's tree")

// dirOf is the sandbox path of the thread's directory fd dirfd, or of its
// working directory for AT_FDCWD. The kernel writes these links out
// relative to the reader's root, and the sandbox's mounts are not under
// the daemon's: what it writes is the path from the sandbox's root.
func (v *sandboxView) dirOf(dirfd int32) (string, error) {
	link := "cwd"
	if dirfd != atFdcwd {
		link = "fd/" + strconv.Itoa(int(dirfd))
	}
	p, err := os.Readlink("/proc/" + strconv.Itoa(v.tid) + "/" + link)
	if err != nil {
		return "", err
	}
	if !path.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		return "", errNotAPath
	}
	return p, nil
}

// lookupOpts says how a name is resolved.
type lookupOpts struct {
	// follow a symlink in the last component.
	follow bool
	// top is where an absolute name starts and ".." stops: "/", or the
	// directory of an openat2 with RESOLVE_IN_ROOT.
	top string
	// resolve are openat2's RESOLVE_* flags. RESOLVE_NO_XDEV is not
	// followed: a call it stops at a mount is judged as if it went on.
	resolve uint64
	// mounts asks for the mount ids of the name and its directory.
	mounts bool
	// pin asks for an O_PATH fd of what the name resolves to, for the
	// daemon to act on in the sandbox's place: the walk then fails where
	// the kernel's would (a missing or unsearchable directory), and the
	// thread walking must have the sandbox's credentials.
	pin bool
	// deny are paths the walk must not enter, nor end at: it fails with
	// errDenied there, as it would at the namespaces set's masks.
	deny []string
}

// deniedPath is the error of a walk that met a path of lookupOpts.deny.
type deniedPath struct{ path string }

func (e *deniedPath) Error() string { return "walk enters denied path " + e.path }

// Is makes a refused walk read as the EACCES it answers.
func (e *deniedPath) Is(target error) bool { return target == unix.EACCES }

// maxSymlinks is the kernel's limit on symlinks followed in one lookup.
const maxSymlinks = 40

// lookup resolves name, relative to the sandbox directory dir, as the
// kernel would for the thread, through the sandbox's root: the daemon
// never leaves the sandbox's tree, whatever the sandbox's symlinks say.
func (v *sandboxView) lookup(dir, name string, o lookupOpts) (namedPath, error) {
	np, _, err := v.resolveName(dir, name, o)
	return np, err
}

// pinned resolves a name argument as lookup does, with o.pin: the O_PATH
// fd of what it names, which the caller closes, and what the walk found.
func (v *sandboxView) pinned(arg nameArg, o lookupOpts) (int, namedPath, error) {
	name, err := v.readString(arg.addr)
	if err != nil {
		return -1, namedPath{}, err
	}
	return v.pinnedName(arg.dirfd, name, o)
}

func (v *sandboxView) pinnedName(dirfd int32, name string, o lookupOpts) (int, namedPath, error) {
	o.pin = true
	var np namedPath
	fd := -1
	var err error
	if start, ok := v.startAt(dirfd, name, o); ok {
		defer unix.Close(start.fd)
		if coveredBy(start.path, o.deny) {
			return -1, namedPath{}, &deniedPath{path.Join(start.path, name)}
		}
		if strings.HasSuffix(name, "/") {
			o.follow = true
		}
		np, fd, err = v.resolve(start.path, name, o, start)
	} else {
		dir := ""
		if name != "" && (!path.IsAbs(name) || o.resolve&(unix.RESOLVE_IN_ROOT|unix.RESOLVE_BENEATH) != 0) {
			if dir, err = v.dirOf(dirfd); err != nil {
				return -1, namedPath{}, err
			}
			if coveredBy(dir, o.deny) {
				return -1, namedPath{}, &deniedPath{path.Join(dir, name)}
			}
		}
		np, fd, err = v.resolveName(dir, name, o)
	}
	if err == nil && fd < 0 {
		err = unix.ENOENT
	}
	return fd, np, err
}

// startAt opens the directory a plain relative name is looked up from
// (the working directory or dirfd), for the walk to begin there: most
// names a program passes are relative to a deep directory, which the
// walk would otherwise go down again component by component.
func (v *sandboxView) startAt(dirfd int32, name string, o lookupOpts) (*walkStart, bool) {
	if name == "" || path.IsAbs(name) || o.resolve != 0 || o.top != "/" {
		return nil, false
	}
	link := "cwd"
	if dirfd != atFdcwd {
		link = "fd/" + strconv.Itoa(int(dirfd))
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(v.tid)+"/"+link, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !path.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		unix.Close(fd)
		return nil, false
	}
	return &walkStart{fd: fd, path: p, rel: name}, true
}

// resolveName resolves name from dir, with o.pin also the O_PATH fd of
// what it names.
func (v *sandboxView) resolveName(dir, name string, o lookupOpts) (namedPath, int, error) {
	if name == "" {
		return namedPath{}, -1, unix.ENOENT
	}
	if strings.HasSuffix(name, "/") {
		// A trailing slash follows a final symlink.
		o.follow = true
	}
	if o.resolve&unix.RESOLVE_IN_ROOT != 0 {
		o.top = dir
	}
	rel := name
	if !path.IsAbs(name) {
		rel = strings.TrimPrefix(dir, o.top) + "/" + name
	}
	if o.top == "/" && o.resolve == 0 && !o.pin {
		if np, ok, err := v.fastLookup(rel, o); ok || err != nil {
			return np, -1, err
		}
	}
	return v.resolve(dir, rel, o, nil)
}

// resolve walks rel from o.top, restarting at each symlink it follows.
func (v *sandboxView) resolve(dir, rel string, o lookupOpts, start *walkStart) (namedPath, int, error) {
	tr := walkTrace{pinned: -1, start: start}
	for range maxSymlinks + 1 {
		np, next, err := v.walk(rel, o, &tr)
		if err != nil || next == "" {
			if err == nil && !tr.allowed(o.resolve, dir, np.Path) {
				// openat2 fails where its RESOLVE_* flags stop the walk.
				err = unix.EXDEV
			}
			if err != nil && tr.pinned >= 0 {
				unix.Close(tr.pinned)
				tr.pinned = -1
			}
			return np, tr.pinned, err
		}
		rel = next
	}
	return namedPath{}, -1, unix.ELOOP
}

// walkTrace is what a walk met on its way that openat2's RESOLVE_* flags
// forbid, and how far it went.
type walkTrace struct {
	symlink, magic bool
	steps          int
	// start, when set, is where the first walk begins instead of o.top.
	start *walkStart
	// pinned is the O_PATH fd of the walk's end, with lookupOpts.pin.
	pinned int
}

// walkStart is a directory a relative name is walked from without
// walking to it first: fd, an O_PATH fd of it the caller holds, at path.
type walkStart struct {
	fd        int
	path, rel string
}

// maxWalkSteps bounds the components one lookup walks, restarts at
// symlinks included: far beyond any real path, it keeps a sandbox from
// making the daemon walk megabytes of symlinked names for one call.
const maxWalkSteps = 4096

func (tr *walkTrace) allowed(resolve uint64, dir, resolved string) bool {
	switch {
	case resolve&unix.RESOLVE_NO_SYMLINKS != 0 && tr.symlink,
		resolve&(unix.RESOLVE_NO_MAGICLINKS|unix.RESOLVE_IN_ROOT|unix.RESOLVE_BENEATH) != 0 && tr.magic,
		resolve&unix.RESOLVE_BENEATH != 0 && !within(resolved, dir):
		return false
	}
	return true
}

// fastLookup resolves rel, relative to the sandbox's root, in two calls
// when nothing on the way to its last component is a symlink, the common
// case; ok is false when the full walk must do it.
func (v *sandboxView) fastLookup(rel string, o lookupOpts) (np namedPath, ok bool, err error) {
	trimmed := strings.TrimRight(rel, "/")
	i := strings.LastIndexByte(trimmed, '/')
	parent, last := strings.Trim(trimmed[:i+1], "/"), trimmed[i+1:]
	if last == "" || last == "." || last == ".." {
		return np, false, nil
	}
	if parent == "" {
		parent = "."
	}
	// The kernel resolves ".." itself, and NO_SYMLINKS makes the lexical
	// path the real one once it succeeds.
	fd, err := unix.Openat2(v.root, parent, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return namedPath{Path: path.Clean("/" + trimmed)}, true, nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.EACCES):
		return np, false, nil
	case err != nil:
		return np, true, err
	}
	defer unix.Close(fd)
	np, link, err := statName(fd, last, o.mounts)
	if errors.Is(err, unix.EACCES) {
		return np, false, nil
	}
	if err != nil {
		return np, true, err
	}
	if link && o.follow {
		return np, false, nil
	}
	np.Path = path.Join("/", parent, last)
	return np, true, nil
}

// statName looks at name in directory fd without following it: link
// says it is a symlink.
func statName(fd int, name string, mounts bool) (np namedPath, link bool, err error) {
	np.ParentExists = true
	if mounts {
		var st unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &st); err == nil {
			np.ParentMount = st.Mnt_id
		}
	}
	var st unix.Statx_t
	err = unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE|unix.STATX_MNT_ID, &st)
	if errors.Is(err, unix.ENOENT) {
		return np, false, nil
	}
	if err != nil {
		return np, false, err
	}
	np.Exists, np.Type, np.Mount = true, uint32(st.Mode)&modeType, st.Mnt_id
	return np, np.Type == modeLnk, nil
}

// walk resolves rel from o.top one component at a time. At a symlink it
// follows, it returns where the walk starts again instead: next, relative
// to o.top.
func (v *sandboxView) walk(rel string, o lookupOpts, tr *walkTrace) (np namedPath, next string, err error) {
	cur := o.top
	var fd int
	if st := tr.start; st != nil {
		tr.start = nil
		cur, rel = st.path, st.rel
		fd, err = unix.FcntlInt(uintptr(st.fd), unix.F_DUPFD_CLOEXEC, 0)
	} else {
		fd, err = v.openDir(cur)
	}
	if err != nil {
		return np, "", err
	}
	var comps []string
	for _, c := range strings.Split(rel, "/") {
		if c != "" && c != "." {
			comps = append(comps, c)
		}
	}
	defer func() { unix.Close(fd) }()
	if coveredBy(cur, o.deny) {
		return np, "", &deniedPath{innermostRoot(cur, o.deny)}
	}
	for i, c := range comps {
		if tr.steps++; tr.steps > maxWalkSteps {
			return np, "", unix.ELOOP
		}
		last := i == len(comps)-1
		rest := strings.Join(comps[i+1:], "/")
		if c == ".." {
			if cur != o.top {
				cur = path.Dir(cur)
				nfd, err := v.openDir(cur)
				if err != nil {
					return np, "", err
				}
				unix.Close(fd)
				fd = nfd
			}
			continue
		}
		name := path.Join(cur, c)
		if (c == "self" || c == "thread-self") && isProcRoot(fd) {
			// Resolved by the kernel, these would name the daemon.
			tr.symlink = true
			return np, relTo(cur, o.top) + "/" + v.procSelf(c) + "/" + rest, nil
		}
		if coveredBy(name, o.deny) {
			// Even a lookup that would fail beneath it says the path is
			// there.
			return np, "", &deniedPath{path.Join(name, rest)}
		}
		np, link, err := statName(fd, c, o.mounts && last)
		switch {
		case err != nil && o.pin:
			// The walk has the sandbox's credentials: its refusal is the
			// kernel's.
			return np, "", err
		case !np.Exists && o.pin:
			return namedPath{Path: path.Join(name, rest)}, "", unix.ENOENT
		case errors.Is(err, unix.EACCES):
			// The daemon may search no further than the sandbox's own uid
			// (a daemon that is not root): neither can the sandbox, unless
			// a mask on the way is what stops both, which the rest as
			// written shows.
			return namedPath{Path: path.Join(name, rest)}, "", nil
		case err != nil:
			return np, "", err
		case !np.Exists && last:
			np.Path = name
			return np, "", nil
		case !np.Exists:
			// A directory on the way is missing: the call fails, unless a
			// mask on the way fails it first, which the rest as written
			// still shows.
			return namedPath{Path: path.Join(name, rest)}, "", nil
		case link && (!last || o.follow):
			target, err := readlinkAt(fd, c)
			if err != nil {
				return np, "", err
			}
			tr.symlink = true
			if isProc(fd) && !isProcRoot(fd) {
				// A magic link: the kernel writes the file out as a path
				// from the sandbox's root, or as no path at all.
				tr.magic = true
				if o.pin && !within(cur, "/proc/"+v.procSelf("self")) {
					// Landlock lets the sandbox follow only its own
					// domain's links; the daemon knows its own process
					// for sure, and no other.
					return np, "", unix.EACCES
				}
				if !path.IsAbs(target) || strings.HasSuffix(target, " (deleted)") {
					return np, "", errNotAPath
				}
				if o.top != "/" {
					return np, "", unix.ELOOP
				}
				return np, target + "/" + rest, nil
			}
			if !path.IsAbs(target) {
				target = relTo(cur, o.top) + "/" + target
			}
			return np, target + "/" + rest, nil
		case last && o.pin:
			pfd, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return np, "", err
			}
			var st unix.Stat_t
			if err := unix.Fstat(pfd, &st); err != nil {
				unix.Close(pfd)
				return np, "", err
			}
			if st.Mode&modeType == modeLnk && o.follow {
				// Became a symlink since it was looked at: walk again.
				unix.Close(pfd)
				return np, rel, nil
			}
			tr.pinned, np.Path, np.Type = pfd, name, st.Mode&modeType
			return np, "", nil
		case last:
			np.Path = name
			return np, "", nil
		case np.Type != modeDir:
			return np, "", unix.ENOTDIR
		}
		nfd, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return np, "", err
		}
		unix.Close(fd)
		fd, cur = nfd, name
	}
	// The name ends at a directory reached by "..", or is o.top itself.
	if o.pin {
		tr.pinned, fd = fd, -1
	}
	return namedPath{Path: cur, Exists: true, Type: modeDir, ParentExists: true}, "", nil
}

// openDir opens the sandbox directory p, a path free of symlinks.
func (v *sandboxView) openDir(p string) (int, error) {
	rel := strings.TrimPrefix(p, "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(v.root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// procSelf is what /proc/self or /proc/thread-self names for the thread,
// in the sandbox's pid namespace, which its /proc shows.
func (v *sandboxView) procSelf(link string) string {
	if v.status == nil {
		st, err := readTaskStatus(v.tid)
		if err != nil {
			// Names nothing: the walk ends as the kernel's would for a
			// process that is gone.
			return "0"
		}
		v.status = &st
	}
	if link == "thread-self" {
		return strconv.Itoa(v.status.nsTgid) + "/task/" + strconv.Itoa(v.status.nsTid)
	}
	return strconv.Itoa(v.status.nsTgid)
}

func relTo(p, top string) string {
	return strings.TrimPrefix(p, strings.TrimSuffix(top, "/"))
}

func readlinkAt(fd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func isProc(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// isProcRoot reports whether fd is the root of a procfs, where self and
// thread-self are.
func isProcRoot(fd int) bool {
	var st unix.Stat_t
	const procRootIno = 1
	return isProc(fd) && unix.Fstat(fd, &st) == nil && st.Ino == procRootIno
}
