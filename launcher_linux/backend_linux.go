package launcherlinux

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/fdwait"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"github.com/sandboxd/sandboxd/pty"
	"golang.org/x/sys/unix"
)

// Config configures the Linux backend.
type Config struct {
	// InitPath is the sandbox init, the C program of cmd/sandboxd-init.
	// Empty means sandboxd-init beside this binary. The host probes
	// always run this binary, which must call RunProbeIfRequested.
	InitPath string
	// SandboxUID and SandboxGID are the identity root callers' sandboxes
	// run as; the host probe tries its primitives for that identity. Zero
	// means the daemon's own (a rootless daemon's sandboxes are its uid).
	SandboxUID, SandboxGID uint32
	// MechanismSet forces one mechanism set ("namespaces" or "landlock");
	// empty chooses per policy.
	MechanismSet string
	// Prestart is how many sandbox inits to keep started ahead for each
	// kind of launch in use (identity, namespaces): a launch that finds
	// one does not wait for its namespaces to be made. Zero starts each
	// init with its launch.
	Prestart int
	// StateDir is where the journal of placeholders and cgroups is kept
	// (see journal), so that a daemon killed before it could remove them
	// has them removed by the next; empty keeps none.
	StateDir string
	// PlaceholderLinger is how long a placeholder the last session using
	// it has left stays for the next one; zero removes it as that session
	// ends. Removing a directory costs the filesystem far more than
	// making it (ext4 mounted with discard waits for the disk, about
	// 0.5 ms), and a client launching back to back would pay for it, and
	// for its remaking, with every launch.
	PlaceholderLinger time.Duration
	// IdentityDir is where a root daemon keeps the /etc/passwd and
	// /etc/group its sessions share (see identityStore), a directory of
	// its own, locked while it runs, emptied as it starts and removed on
	// Close; empty, or a daemon that is not root, has each init make its
	// own. A daemon that is not root would own the files as the uid its
	// sandboxes run as.
	IdentityDir string
	// Logf logs what the backend does not fail for but an operator
	// should know: that the sessions' identity files cannot be shared, or
	// that a thread could not leave a sandbox's network namespace.
	Logf func(format string, args ...any)
}

// initCapabilities are what the init needs to build the sandbox: mounts and
// the hostname, the loopback, dropping the bounding set, creating
// placeholders in directories the sandbox uid owns but cannot write, and
// entering the new root (chroot, once it is stacked on the namespace's).
var initCapabilities = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE, unix.CAP_SYS_CHROOT}

// planBuffers hold encoded plans: one is written to the init's pipe and
// not needed after, and at some 6 KiB for the workspace-write preset it
// was the largest of a launch's allocations.
var planBuffers = sync.Pool{New: func() any { return new([]byte) }}

type backend struct {
	host   *HostProbe
	forced MechanismSet

	mu           sync.Mutex
	placeholders map[string]*placeholder
	linger       time.Duration
	inits        *initPool
	cgroups      *cgroups
	idmaps       *idmapper
	journal      *journal
	// leftovers and leftBehind are what the journal removed at start and
	// what it left though an entry named it (Leftovers, LeftBehind).
	leftovers, leftBehind []string
	// protect is the state directory, resolved, and uid and gid the
	// sandbox identity: what Capabilities plans with, as a launch does.
	protect  []string
	uid, gid uint32
	// identity is the last identity files planned, under mu.
	identity identityCache
	// diags says whether sessions make their sock_diag sockets when
	// first needed.
	diags diagMode
	// identities are the identity files shared between sessions, nil
	// where each init makes its own.
	identities *identityStore
}

// New probes the host and returns the Linux backend.
func New(cfg Config) (launcher.Backend, error) {
	forced, err := ParseMechanismSet(cfg.MechanismSet)
	if err != nil {
		return nil, err
	}
	initPath := cfg.InitPath
	if initPath == "" {
		if initPath, err = besideSelf(initBinary); err != nil {
			return nil, err
		}
	}
	b := &backend{forced: forced, placeholders: map[string]*placeholder{}, linger: cfg.PlaceholderLinger, inits: newInitPool(initPath, cfg.Prestart), idmaps: newIdmapper(initPath)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.host = ProbeHost(ctx, selfExe, cfg.SandboxUID, cfg.SandboxGID)
	b.cgroups = newCgroups(b.host.cgroups)
	if b.journal, b.leftovers, b.leftBehind, err = openJournal(cfg.StateDir); err != nil {
		return nil, err
	}
	b.cgroups.journal = b.journal
	b.diags.logf = cfg.Logf
	if cfg.IdentityDir != "" && os.Geteuid() == 0 {
		b.identities = newIdentityStore(cfg.IdentityDir, cfg.Logf)
	}
	if cfg.StateDir != "" {
		if abs, err := filepath.Abs(cfg.StateDir); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				b.protect = []string{real}
			}
		}
	}
	b.uid, b.gid = cfg.SandboxUID, cfg.SandboxGID
	if b.uid == 0 || os.Geteuid() != 0 {
		// The probe's identity (ProbeHost): a rootless daemon's sandbox
		// runs as its own uid.
		b.uid, b.gid = uint32(os.Getuid()), uint32(os.Getgid())
	}
	return b, nil
}

// selfExe is this binary, as the kernel knows it: a binary replaced on disk
// since it started is not what runs.
const selfExe = "/proc/self/exe"

// initBinary is the sandbox init's own binary, built by make from
// cmd/sandboxd-init.
const initBinary = "sandboxd-init"

// besideSelf is the path of the binary name in this binary's directory.
// The init runs with the sandbox's identity and decides what confines it,
// so it must be as trusted as the daemon: owned by root, the daemon's uid
// or the daemon binary's owner, and writable by its owner alone.
func besideSelf(name string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the sandbox init beside the daemon: %w", err)
	}
	return beside(self, name)
}

// beside is besideSelf for the binary self.
func beside(self, name string) (string, error) {
	path := filepath.Join(filepath.Dir(self), name)
	var st, selfSt unix.Stat_t
	if err := unix.Stat(path, &st); errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("sandbox init %s not found: it is a C program beside the daemon; build both with make (bin/sandboxd and bin/sandboxd-init)", path)
	} else if err != nil {
		return "", fmt.Errorf("sandbox init %s: %w", path, err)
	}
	if err := unix.Stat(self, &selfSt); err != nil {
		return "", fmt.Errorf("daemon binary %s: %w", self, err)
	}
	trusted := st.Uid == 0 || int(st.Uid) == os.Geteuid() || st.Uid == selfSt.Uid
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o022 != 0 || !trusted {
		return "", fmt.Errorf("sandbox init %s: must be a regular file owned by root, uid %d or the owner of %s, and writable by its owner alone (mode %o, uid %d)",
			path, os.Geteuid(), self, st.Mode&0o7777, st.Uid)
	}
	return path, nil
}

func (b *backend) Name() string { return "linux" }

// Close releases what the backend holds for all sessions: the daemon's
// cgroup directories, and the placeholders no session uses.
func (b *backend) Close() error {
	b.cgroups.close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, e := range b.placeholders {
		if e.users == 0 {
			b.removePlaceholderLocked(key, e)
		}
	}
	if b.identities != nil {
		b.identities.close()
	}
	return nil
}

func (b *backend) Capabilities() *sandboxdv1.CapabilitiesReport {
	return capabilities(b.host, b.forced, b.protect, openToSandbox(b.protect, b.uid, b.gid))
}

// SessionSocketPath is where every sandbox of this backend finds its
// session socket: the landlock set, which could show it only at its host
// path, refuses sessions that have one.
func (b *backend) SessionSocketPath(string) string { return SessionSocketPath }

func (b *backend) Start(ctx context.Context, spec launcher.Spec) (launcher.Process, error) {
	if spec.UID == 0 || spec.GID == 0 {
		return nil, errors.New("refusing to start a sandbox as host root (uid or gid 0)")
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	// The sandbox's end, and its listener and outputs while they are
	// quiet, wait in the shared waiter: a daemon that cannot make it
	// (out of descriptors) refuses the launch and says why.
	if err := fdwait.Ready(); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	// Planning and taking the placeholders happen under one lock, so a
	// session ending meanwhile cannot remove a placeholder this plan counts
	// on already being there.
	b.mu.Lock()
	sp, err := b.plan(spec.PlanRequest(), spec.Layers)
	var held, makes []string
	if err == nil {
		held, makes = b.holdPlaceholders(sp.Plan, sp.carveOuts, spec.Layers)
	}
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	plan := sp.Plan
	var release sync.Once
	// The session keeps cleanup to its end, and so all it refers to: the
	// shared files, not the plan (its mount steps alone are some 5 KiB).
	shared := sp.shared
	cleanup := func() {
		release.Do(func() {
			b.releasePlaceholders(held)
			b.identities.release(shared)
		})
	}
	started := false
	defer func() {
		if !started {
			cleanup()
		}
	}()
	trees := map[string]int{}
	defer func() {
		for _, fd := range trees {
			unix.Close(fd)
		}
	}()
	for _, w := range sp.mapped {
		tree, err := b.idmappedTree(w, sp.keys[w])
		if err != nil {
			return nil, idmapRefusal(w, spec.UID, spec.GID, err)
		}
		trees[w] = tree
	}
	if plan.Set == SetNamespaces {
		// The daemon mapped a layer's owner, if it had to, when it made
		// the layer (overlay cannot be mapped itself).
		for _, l := range sp.layers {
			if spec.Layers[l] == nil {
				continue
			}
			tree, err := cloneTree(spec.Layers[l])
			if err != nil {
				return nil, fmt.Errorf("layer of %s: %w", l, err)
			}
			trees[l] = tree
		}
	}

	cg, err := b.cgroups.create(spec.SessionID, spec.ParentSessionID, sp.limits, spec.OnDenial)
	if err != nil {
		return nil, err
	}
	key := keyOf(plan, spec.UID, spec.GID)
	ip, err := b.inits.take(key)
	if err != nil {
		if cg != nil {
			cg.end()
		}
		return nil, err
	}
	defer b.inits.refill(key)
	proc := ip.proc
	defer ip.pass.Close()
	p := &process{proc: proc, report: bufio.NewReaderSize(ip.report, reportBuffer), reportFile: fdwait.Opened(ip.report), cleanup: cleanup, namespaces: plan.Namespaces, cgroup: cg,
		enforcement: sharedReport(&sandboxdv1.EnforcementReport{Backend: "linux", Fields: plan.Report, MechanismSet: string(plan.Set), DenialSources: plan.DenialSources})}
	pass, err := ip.pass.SyscallConn()
	if err != nil {
		ip.plan.Close()
		p.abort()
		return nil, fmt.Errorf("pass socket of sandbox init: %w", err)
	}
	var cgroupTasks []int
	if cg != nil {
		// Before the plan: the init starts nothing until it has it, so
		// every process of the sandbox begins inside the limits.
		err := cg.join(proc.pid)
		if err == nil {
			cgroupTasks, err = cg.tasksFiles()
		}
		if err != nil {
			ip.plan.Close()
			p.abort()
			return nil, err
		}
		defer func() {
			for _, fd := range cgroupTasks {
				unix.Close(fd)
			}
		}()
		plan.Exec.CgroupTasks = len(cgroupTasks)
	}
	// Setup can block (a mount on a dead network filesystem); a caller that
	// gives up must not leave the init behind. A callback rather than a
	// goroutine waiting for either: starting one per launch woke an idle
	// processor for it.
	defer context.AfterFunc(ctx, func() { abandonInit(proc, plan.Namespaces) })()
	for _, s := range plan.Mounts {
		// Before the stdio: the init takes them as it builds the root.
		switch {
		case s.Idmapped:
			if err := sendFds(pass, sandboxinit.PassMount, trees[s.Target]); err != nil {
				ip.plan.Close()
				p.abort()
				return nil, fmt.Errorf("send ID-mapped write root %s to sandbox init: %w", s.Target, err)
			}
		case s.Shared:
			if err := sendSharedFile(pass, sp.shared[s.Target]); err != nil {
				ip.plan.Close()
				p.abort()
				return nil, fmt.Errorf("send the daemon's %s to sandbox init: %w", s.Target, err)
			}
		}
	}
	if !spec.Stdio.Terminal {
		stdio := []int{int(spec.Stdio.Stdin.Fd()), int(spec.Stdio.Stdout.Fd()), int(spec.Stdio.Stderr.Fd())}
		err := sendFds(pass, sandboxinit.PassStdio, stdio...)
		runtime.KeepAlive(spec.Stdio)
		if err != nil {
			ip.plan.Close()
			p.abort()
			return nil, fmt.Errorf("send stdio to sandbox init: %w", err)
		}
	}
	if len(cgroupTasks) > 0 {
		if err := sendFds(pass, sandboxinit.PassCgroup, cgroupTasks...); err != nil {
			ip.plan.Close()
			p.abort()
			return nil, fmt.Errorf("send cgroup files to sandbox init: %w", err)
		}
	}
	buf := planBuffers.Get().(*[]byte)
	encoded, err := plan.Plan.AppendBinary((*buf)[:0])
	if err != nil {
		planBuffers.Put(buf)
		ip.plan.Close()
		p.abort()
		return nil, fmt.Errorf("encode plan for sandbox init: %w", err)
	}
	_, err = ip.plan.Write(encoded)
	*buf = encoded
	planBuffers.Put(buf)
	if err != nil {
		ip.plan.Close()
		p.abort()
		return nil, fmt.Errorf("send plan to sandbox init: %w", err)
	}
	ip.plan.Close()

	var passErr error
	if plan.Exec.Terminal || plan.Exec.Listener || plan.ProxyListen != "" {
		// Nothing arrives when the init fails first; its report then says
		// why.
		passErr = p.receivePassed(pass, plan, spec, &b.diags)
	}
	m, err := p.next()
	// The placeholders come first in the plan: made by now, if at all.
	b.noteMadePlaceholders(makes)
	if err != nil {
		p.abort()
		return nil, fmt.Errorf("sandbox init died during setup: %w", err)
	}
	switch m.Type {
	case "started":
		if err := ctx.Err(); err != nil {
			p.abort()
			return nil, fmt.Errorf("sandbox setup abandoned: %w", err)
		}
		if passErr != nil {
			p.abort()
			return nil, fmt.Errorf("sandbox init started: %w", passErr)
		}
		started = true
		// From here on the report carries the exit message alone, which
		// finds a reader made for it: an idle session keeps none.
		shrinkPipe(ip.report)
		if p.report.Buffered() == 0 {
			p.report = nil
			p.unpollReport()
		}
		if cg != nil {
			cg.watch(func() { p.Kill() })
		}
		return p, nil
	case "exec-error":
		p.abort()
		if m.Op == "chdir" {
			_, remedy := idmapShortfall(plan.Set)
			if remedy == "" && (m.Blocker == "" || m.Blocker == m.Path) && !coveredBy(m.Path, hostTrees) {
				// A write root there would be ID-mapped; one cannot open
				// the way through an ancestor, nor a host tree.
				remedy = "make it, or a directory above it, a write root"
			}
			e := unusableCwd(m, spec.UID, spec.GID, remedy)
			if e.Errno == syscall.ENOENT && within(m.Path, "/tmp") && sp.privateTmp {
				e.Hint = "the sandbox has a private /tmp; make the directory a write root to see it"
			}
			return nil, e
		}
		return nil, &launcher.ExecError{Op: m.Op, Path: m.Path, Errno: syscall.Errno(m.Errno)}
	case "setup-error":
		p.abort()
		if m.Op == "access" && m.Field == "filesystem.write" {
			_, remedy := idmapShortfall(plan.Set)
			return nil, unusableWriteRoot(m, spec.UID, spec.GID, sp.notes[m.Path], remedy)
		}
		return nil, setupRefusal(m)
	}
	p.abort()
	return nil, fmt.Errorf("sandbox init: unexpected message %q", m.Type)
}

// idmappedTree is the ID-mapped clone of write root w, mapped as k says.
func (b *backend) idmappedTree(w string, k idmapKey) (int, error) {
	ns, err := b.idmaps.userns(k)
	if err != nil {
		return -1, err
	}
	return idmappedTree(w, ns)
}

// identityRefusal explains a failed start of a namespace-less init: the
// daemon could not become the sandbox identity.
func identityRefusal(err error, uid uint32) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("start sandbox init: %w", err)
	}
	return &launcher.Unenforceable{
		Field: "process", Mechanism: fmt.Sprintf("running as the sandbox uid %d", uid),
		Found: "the daemon could not switch to it", Errno: errno, Probe: "setgroups + setgid + setuid",
		Remedy: remedyIDMap(true),
	}
}

// namespaceRefusal explains a failed clone of the init: the host does not let
// this daemon create the namespaces the policy needs.
func namespaceRefusal(err error, netns bool) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("start sandbox init: %w", err)
	}
	kinds := "user, mount, pid, ipc, uts, cgroup"
	// The flags of spawner.c's clone of an init.
	flags := uint64(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if netns {
		kinds += ", net"
		flags |= unix.CLONE_NEWNET
	}
	found := "the kernel refused to create them for this daemon"
	remedy := "run sandboxd as root, or allow unprivileged user namespaces (sysctl user.max_user_namespaces>0, kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0)"
	if errno == unix.ENOSPC {
		found = namespacesExhausted(flags, "/proc/sys/user")
		remedy = "raise the user.max_*_namespaces limit named (on the host, or in the enclosing container), or end sessions"
	}
	return &launcher.Unenforceable{
		Field:     "process",
		Mechanism: "new " + kinds + " namespaces with a one-uid map",
		Found:     found,
		Errno:     errno,
		Probe:     "clone(" + cloneFlagNames(flags) + ") + uid_map",
		Remedy:    remedy,
	}
}

func setupRefusal(m sandboxinit.Message) error {
	u := &launcher.Unenforceable{
		Field:     m.Field,
		Mechanism: "sandbox setup step " + m.Op,
		Found:     m.Detail,
		Errno:     syscall.Errno(m.Errno),
		Probe:     strings.TrimSpace(m.Op + " " + m.Path),
		Remedy:    "check that the host allows this mount operation to an unprivileged user namespace (a container may mask /proc or forbid mounts); run sandboxd as root on the host",
	}
	switch {
	case m.Field == "network.mode":
		u.Remedy = "allow configuring loopback in a new network namespace, or use network HOST"
	case syscall.Errno(m.Errno) == syscall.EACCES:
		u.Remedy = "the sandbox's uid may not reach this path: give it search permission on every ancestor, or call the daemon as the path's owner (a root caller's sandbox runs as the daemon's --sandbox-uid)"
	}
	return u
}

// identityCache holds the last sandboxIdentityFiles answer, which every
// launch of one identity would otherwise read and rewrite the host's files
// for: it stands while neither file has changed.
type identityCache struct {
	uid, gid uint32
	stamp    [2]fileStamp
	passwd   string
	group    string
}

// fileStamp is what tells a file apart from itself rewritten: a new inode,
// or a new size, modification or change time (nanoseconds).
type fileStamp struct {
	ok           bool
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func stampOf(path string) fileStamp {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return fileStamp{}
	}
	return fileStamp{ok: true, dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// sandboxIdentityFiles are identityFiles from the host's files; a file the
// host does not have is not made up. c is consulted and updated; its
// owner serializes the calls.
func sandboxIdentityFiles(c *identityCache, uid, gid uint32) (passwd, group string) {
	return identityFilesAt(c, "/etc/passwd", "/etc/group", uid, gid)
}

func identityFilesAt(c *identityCache, passwdPath, groupPath string, uid, gid uint32) (passwd, group string) {
	stamp := [2]fileStamp{stampOf(passwdPath), stampOf(groupPath)}
	if c.uid == uid && c.gid == gid && c.stamp == stamp && stamp[0].ok && stamp[1].ok {
		return c.passwd, c.group
	}
	p, perr := os.ReadFile(passwdPath)
	g, gerr := os.ReadFile(groupPath)
	passwd, group = identityFiles(string(p), string(g), uid, gid)
	if perr != nil {
		passwd = ""
	}
	if gerr != nil {
		group = ""
	}
	*c = identityCache{uid: uid, gid: gid, stamp: stamp, passwd: passwd, group: group}
	return passwd, group
}

func hostExists(path string) (bool, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, false
	}
	return true, fi.IsDir()
}

// existsIn is hostExists that looks beneath a layered path in its layer,
// which is what the sandbox will see there.
func existsIn(layers map[string]*os.File) func(string) (bool, bool) {
	if len(layers) == 0 {
		return hostExists
	}
	return func(path string) (bool, bool) {
		root, rel, ok := layerOf(path, layers)
		if !ok {
			return hostExists(path)
		}
		fd, err := unix.Openat2(int(root.Fd()), rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			return false, false
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			return false, false
		}
		return true, st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
}

// layerOf finds the layer path lies in: its mount's root and path relative
// to it ("." for the layered path itself).
func layerOf(path string, layers map[string]*os.File) (root *os.File, rel string, ok bool) {
	best := ""
	for l := range layers {
		if within(path, l) && len(l) > len(best) {
			best = l
		}
	}
	if best == "" {
		return nil, "", false
	}
	rel = strings.TrimPrefix(strings.TrimPrefix(path, best), "/")
	if rel == "" {
		rel = "."
	}
	return layers[best], rel, true
}

// placeholder is a directory the daemon made so that a carve-out or deny
// path that did not exist could be covered. It is removed, if still empty,
// once the last session relying on it has ended (PlaceholderLinger after):
// removing it earlier would detach the masks of the sessions still
// running on it.
type placeholder struct {
	users int
	// idleSince is when users last fell to zero, and timer removes the
	// placeholder PlaceholderLinger after; it is stopped while a session
	// holds the placeholder, so that a launch starts no timer's goroutine.
	idleSince time.Time
	timer     *time.Timer
	// made are the directories created for it, deepest first.
	made []string
	// entry is its journal entry, and ids the identities of made it
	// records (noteMadePlaceholders).
	entry string
	ids   []dirID
	// layer is, for a placeholder inside a layer, the root of the layer's
	// mount, which made is relative to. It has no journal entry: the
	// layer is the daemon's, not the host's.
	layer *os.File
}

// holdPlaceholders counts this session among the users of every placeholder
// it plans or relies on, and returns their keys and those of the ones its
// init makes on the host; b.mu is held.
func (b *backend) holdPlaceholders(plan *Plan, carveOuts []string, layers map[string]*os.File) (held, makes []string) {
	planned := map[string]bool{}
	for _, s := range plan.Mounts {
		if s.Kind == MountPlaceholder {
			planned[s.Source] = true
		}
	}
	for _, p := range carveOuts {
		// Inside a layer the placeholder is made in the layer, which is
		// the session's alone.
		key := p
		root, rel, inLayer := layerOf(p, layers)
		if inLayer {
			key = fmt.Sprintf("%p:%s", root, p)
		}
		e := b.placeholders[key]
		switch {
		case e != nil:
			if e.users == 0 && e.timer != nil {
				e.timer.Stop()
			}
			if planned[p] && !inLayer {
				b.replanPlaceholderLocked(p, e)
			}
		case planned[p] && inLayer:
			e = &placeholder{layer: root}
			exists := existsIn(layers)
			for d, dp := rel, p; d != "."; d, dp = filepath.Dir(d), filepath.Dir(dp) {
				if ok, _ := exists(dp); ok {
					break
				}
				e.made = append(e.made, d)
			}
			b.placeholders[key] = e
		case planned[p]:
			e = &placeholder{made: missingDirs(p)}
			if len(e.made) > 0 {
				e.ids = make([]dirID, len(e.made))
				e.entry = b.journal.record(placeholderEntry(p, e.ids))
			}
			b.placeholders[key] = e
		default:
			continue
		}
		e.users++
		held = append(held, key)
		if planned[p] && !inLayer {
			makes = append(makes, key)
		}
	}
	return held, makes
}

// placeholderEntry is the journal entry of placeholder p, with the
// identities of the directories made for it, deepest first.
func placeholderEntry(p string, ids []dirID) journalEntry {
	return journalEntry{Kind: entryPlaceholder, Path: []byte(p), Made: ids}
}

// noteMadePlaceholders records in the journal the identities of what is
// at the paths made for the placeholders makes, once the session's init
// has set up (or failed to): the next start, and the placeholder's
// expiry, remove only those. The init does not say what it made, so a
// directory someone else made there in between is taken for its. A
// daemon killed before leaves them; an init that made none leaves them
// unknown for the next session that plans them.
func (b *backend) noteMadePlaceholders(makes []string) {
	if b.journal == nil || len(makes) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, key := range makes {
		e := b.placeholders[key]
		if e == nil || len(e.made) == 0 {
			continue
		}
		ids := madeDirIDs(e.made[0], len(e.made))
		if !slices.Equal(ids, e.ids) {
			e.ids = ids
			e.entry = b.journal.replace(e.entry, placeholderEntry(e.made[0], ids))
		}
	}
}

// missingDirs are p and those of its parents that do not exist, deepest
// first: the directories making placeholder p makes.
func missingDirs(p string) []string {
	var made []string
	for d := p; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	return made
}

// replanPlaceholderLocked brings lingering placeholder p up to a plan that
// makes it again: someone removed it, and maybe parents of it, since. The
// directories the init makes now are the daemon's to remove too, and its
// journal entry must name them; b.mu is held.
func (b *backend) replanPlaceholderLocked(p string, e *placeholder) {
	made := missingDirs(p)
	// Both lists run up from p: the longer holds the other.
	if len(made) <= len(e.made) {
		return
	}
	ids := make([]dirID, len(made))
	e.made, e.ids = made, ids
	e.entry = b.journal.replace(e.entry, placeholderEntry(p, ids))
}

func (b *backend) releasePlaceholders(held []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range held {
		e := b.placeholders[p]
		if e.users--; e.users > 0 {
			continue
		}
		// A placeholder in a layer goes with the session's layer.
		if e.layer != nil || b.linger <= 0 {
			b.removePlaceholderLocked(p, e)
			continue
		}
		e.idleSince = time.Now()
		if e.timer == nil {
			e.timer = time.AfterFunc(b.linger, func() { b.expirePlaceholder(p, e) })
		} else {
			e.timer.Reset(b.linger)
		}
	}
}

// expirePlaceholder removes placeholder e, known as key, once no session
// has held it for PlaceholderLinger. The timer may have fired as a
// session took it, or before a later release reset it: then it waits on.
func (b *backend) expirePlaceholder(key string, e *placeholder) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.placeholders[key] != e || e.users > 0 {
		return
	}
	if wait := b.linger - time.Since(e.idleSince); wait > 0 {
		e.timer.Reset(wait)
		return
	}
	b.removePlaceholderLocked(key, e)
}

// removePlaceholderLocked removes placeholder e, known as key, if it is
// still empty; b.mu is held, and no session uses it.
func (b *backend) removePlaceholderLocked(key string, e *placeholder) {
	delete(b.placeholders, key)
	if e.timer != nil {
		e.timer.Stop()
	}
	if e.layer != nil {
		for _, d := range e.made {
			removeEmptyDirBeneath(e.layer, d)
		}
		return
	}
	for i, d := range e.made {
		// Seen made, a directory is removed only if it still is that
		// one: since, the user may have removed it and made another
		// there, as the next start would check.
		if i < len(e.ids) && e.ids[i] != (dirID{}) {
			removeMadeDir(d, e.ids[i])
		} else {
			removeEmptyDirNoFollow(d)
		}
	}
	b.journal.forget(e.entry)
}

// removeEmptyDirBeneath removes the directory rel beneath root if it is
// empty.
func removeEmptyDirBeneath(root *os.File, rel string) {
	parent, err := unix.Openat2(int(root.Fd()), filepath.Dir(rel), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return
	}
	defer unix.Close(parent)
	unix.Unlinkat(parent, filepath.Base(rel), unix.AT_REMOVEDIR)
}

func removeEmptyDirNoFollow(path string) {
	parent, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(path), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return
	}
	defer unix.Close(parent)
	unix.Unlinkat(parent, filepath.Base(path), unix.AT_REMOVEDIR)
}

type process struct {
	proc *initHandle
	// report reads reportFile; nil while the command runs, until the
	// exit message comes.
	report *bufio.Reader
	// reportFile is in the runtime's poller while the sandbox is set up,
	// and out of it while the command runs (unpollReport).
	reportFile  *fdwait.Lazy
	cleanup     func()
	enforcement *sandboxdv1.EnforcementReport
	terminal    *os.File
	namespaces  bool
	// cgroup holds the sandbox's limits, nil when it has none.
	cgroup *sessionCgroup
	// proxy is the listener the daemon's proxy serves, nil without one.
	proxy net.Listener
	// forwards accept on the sandbox's 127.0.0.1 at the ports the policy
	// allows of the host's (Plan.LoopbackForwards).
	forwards []net.Listener
	// supervisor answers the sandbox's seccomp notifications, nil when
	// it has no listener.
	supervisor *supervisor

	waitOnce sync.Once
	status   launcher.Status
}

// A session's report reader is small, made twice a session (for the setup
// and for the exit message); a longer line, a setup error's, is gathered
// in pieces up to maxReportLine.
const (
	reportBuffer  = 256
	maxReportLine = 64 << 10
)

// unpollReport takes the report pipe out of the runtime's poller once the
// command runs, for the exit message alone, which comes through the shared
// waiter (NotifyExit): the poller keeps a descriptor of its own (512
// bytes) for every file it has held at once and never frees it, and the
// report was the only file of an idle session's there. A duplicate of the
// descriptor, not yet a file, replaces the file; without one (out of
// descriptors) the file stays.
func (p *process) unpollReport() {
	old, err := p.reportFile.File()
	if err != nil {
		return
	}
	rc, err := old.SyscallConn()
	if err != nil {
		return
	}
	dup, dupErr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { dup, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || dupErr != nil {
		return
	}
	p.reportFile = fdwait.NewLazy(dup, old.Name())
	old.Close()
}

func (p *process) next() (sandboxinit.Message, error) {
	var m sandboxinit.Message
	var line []byte
	if p.report == nil {
		f, err := p.reportFile.File()
		if err != nil {
			return m, fmt.Errorf("read report: %w", err)
		}
		p.report = bufio.NewReaderSize(f, reportBuffer)
	}
	for {
		chunk, err := p.report.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxReportLine {
			// Nothing but the init writes there: a longer line is a
			// broken init, not something to buffer.
			return m, fmt.Errorf("read report: a line longer than %d bytes", maxReportLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return m, errors.New("report pipe closed")
			}
			return m, fmt.Errorf("read report: %w", err)
		}
		break
	}
	if m, ok := quickReport(line); ok {
		return m, nil
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("decode report: %w", err)
	}
	return m, nil
}

// quickReport decodes the lines every launch reads, {"type":"started"} and
// the exit's with its code and signal, as the init writes them (each field
// that is not zero, in the order of sandboxinit.Message). encoding/json's
// reflection cost more than the rest of reading them; ok is false for
// anything else, which goes through it.
func quickReport(line []byte) (m sandboxinit.Message, ok bool) {
	rest, ok := bytes.CutSuffix(line, []byte("}\n"))
	if !ok {
		return m, false
	}
	if string(rest) == `{"type":"started"` {
		m.Type = "started"
		return m, true
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`{"type":"exit"`)); !ok {
		return m, false
	}
	m.Type = "exit"
	if r, found := bytes.CutPrefix(rest, []byte(`,"code":`)); found {
		if m.Code, rest, ok = leadingInt(r); !ok {
			return m, false
		}
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"signal":`)); found {
		if m.Signal, rest, ok = leadingInt(r); !ok {
			return m, false
		}
	}
	return m, len(rest) == 0
}

// leadingInt reads the JSON integer b starts with: an optional minus, then
// 0 or digits not starting with 0.
func leadingInt(b []byte) (n int, rest []byte, ok bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || b[start] == '0' && i > start+1 {
		return 0, b, false
	}
	n, err := strconv.Atoi(string(b[:i]))
	return n, b[i:], err == nil
}

// abandonInit kills the init of a launch its caller gave up on, and what
// it started. SIGKILL of a pid namespace's init ends everything in it. A
// namespace-less init may have started the command before it reports so,
// and SIGKILL would leave that running, reparented outside any session, so
// it is asked to kill its tree first (it takes SigKillAll once its setup
// is over, and then ends with the command); it gets SIGKILL if it is still
// there a second later, stuck in a setup that started nothing.
func abandonInit(proc *initHandle, namespaces bool) {
	if !namespaces && proc.signal(sandboxinit.SigKillAll) == nil {
		proc.waitFor(time.Second)
	}
	proc.signal(unix.SIGKILL)
}

func (p *process) abort() {
	p.Kill()
	p.Wait()
	if p.terminal != nil {
		p.terminal.Close()
	}
}

func (p *process) Terminal() *os.File { return p.terminal }

// passSocket is the channel on which the init hands the daemon a PTY
// session's terminal master, as runc's console socket, and the seccomp
// listener of the command's filter (SCM_RIGHTS). The daemon's end is in
// the runtime's poller: the init sends what it passes back only once it
// has built the sandbox, and a receive that blocked for that long would
// hold a thread.
func passSocket() (parent *os.File, child int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("fd passing socketpair: %w", err)
	}
	if parent, err = pollable(fds[0], "pass-parent"); err != nil {
		unix.Close(fds[1])
		return nil, -1, fmt.Errorf("fd passing socket: %w", err)
	}
	return parent, fds[1], nil
}

// sendFds sends fds to the init, tagged, on its pass socket.
func sendFds(sock syscall.RawConn, tag byte, fds ...int) error {
	var serr error
	err := sock.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), []byte{tag}, unix.UnixRights(fds...), nil, 0)
		return serr != unix.EAGAIN
	})
	return cmp.Or(err, serr)
}

// sendSharedFile sends the init a mount of f of its own.
func sendSharedFile(sock syscall.RawConn, f *identityFile) error {
	if f == nil {
		return errors.New("the plan has a shared file the daemon does not hold")
	}
	tree, err := f.mount()
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	return sendFds(sock, sandboxinit.PassMount, tree)
}

// receivePassed takes what the init sends on the pass socket, in the order
// it sends them, and stops at the first that does not come.
func (p *process) receivePassed(sock syscall.RawConn, plan *Plan, spec launcher.Spec, diags *diagMode) error {
	writes := plan.Supervise.GetWrites()
	if plan.ProxyListen != "" {
		fd, err := receiveFd(sock, sandboxinit.PassProxy)
		if err != nil {
			return fmt.Errorf("proxy listener: %w", err)
		}
		f := os.NewFile(uintptr(fd), "proxy")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("proxy listener: %w", err)
		}
		p.proxy = l
		go spec.Proxy(l)
		if len(plan.LoopbackForwards) > 0 && spec.Forward == nil {
			return errors.New("loopback forwards: the daemon serves none")
		}
		for _, port := range plan.LoopbackForwards {
			fd, err := receiveFd(sock, sandboxinit.PassForward)
			if err != nil {
				return fmt.Errorf("loopback forward %d: %w", port, err)
			}
			f := os.NewFile(uintptr(fd), "forward")
			l, err := net.FileListener(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("loopback forward %d: %w", port, err)
			}
			p.forwards = append(p.forwards, l)
			go spec.Forward(l, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port))
		}
	}
	if plan.Exec.Terminal {
		fd, err := receiveFd(sock, sandboxinit.PassTerminal)
		if err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		if plan.Exec.TerminalRule && writes != nil {
			// The init grants the replica of this master to the command.
			n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
			if err != nil {
				unix.Close(fd)
				return fmt.Errorf("terminal: TIOCGPTN: %w", err)
			}
			writes = writes.withTerminal("/dev/pts/" + strconv.FormatUint(uint64(n), 10))
		}
		if p.terminal, err = pty.Adopt(fd); err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
	}
	if plan.Exec.Listener {
		fd, err := receiveFd(sock, sandboxinit.PassListener)
		if err != nil {
			return fmt.Errorf("seccomp listener: %w", err)
		}
		root, err := receiveFd(sock, sandboxinit.PassRootDir)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("sandbox root: %w", err)
		}
		diag := -1
		var openDiag func() (int, error)
		switch {
		case plan.NetNS:
			if diag, err = receiveFd(sock, sandboxinit.PassDiag); err != nil {
				unix.Close(fd)
				unix.Close(root)
				return fmt.Errorf("sock_diag socket: %w", err)
			}
			if diags.atNeed(p.proc) {
				unix.Close(diag)
				diag, openDiag = -1, diags.opener(p.proc)
			}
		case plan.Supervise.SharedNetNS:
			// The sandbox's network namespace is the daemon's own.
			if diag, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG); err != nil {
				unix.Close(fd)
				unix.Close(root)
				return fmt.Errorf("sock_diag socket: %w", err)
			}
		}
		if p.supervisor, err = supervise(fd, root, diag, openDiag, p.proc.pid, plan.Supervise, writes, spec.SessionSocket, spec.OnDenial); err != nil {
			return err
		}
	}
	return nil
}

// receiveFd receives one fd that must come with tag.
func receiveFd(sock syscall.RawConn, tag byte) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn, flags int
	var rerr error
	err := sock.Read(func(fd uintptr) bool {
		n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err = cmp.Or(err, rerr); err != nil {
		return -1, fmt.Errorf("receive: %w", err)
	}
	if n == 0 {
		return -1, errors.New("init closed the socket")
	}
	if flags&unix.MSG_CTRUNC != 0 {
		closeRights(oob[:oobn])
		return -1, fdsDropped(fmt.Sprintf("the init's fd %q", tag))
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("bad control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("bad SCM_RIGHTS: %v", err)
	}
	if buf[0] != tag {
		unix.Close(fds[0])
		return -1, fmt.Errorf("fd tagged %q, want %q", buf[0], tag)
	}
	return fds[0], nil
}

// fdsDropped is the error of a message whose fds the kernel dropped, which
// it says with MSG_CTRUNC: it installs none when the receiver has no
// descriptor free, that is when the daemon is at its RLIMIT_NOFILE. It is
// no malformed message, and "bad control message" sent operators after the
// init rather than the daemon's limit.
func fdsDropped(what string) error {
	var lim unix.Rlimit
	limit := "its RLIMIT_NOFILE"
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		limit = fmt.Sprintf("its RLIMIT_NOFILE of %d", lim.Cur)
	}
	return fmt.Errorf("%s did not arrive: the kernel dropped it (MSG_CTRUNC), as it does when the daemon has no descriptor free under %s (raise the daemon's LimitNOFILE, or end sessions): %w", what, limit, launcher.ErrHostResources)
}

// closeRights closes the fds that did arrive in the control messages oob.
func closeRights(oob []byte) {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	for i := range msgs {
		fds, _ := unix.ParseUnixRights(&msgs[i])
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

func (p *process) Pid() int { return p.proc.pid }

// PidIsInit: Pid is the sandbox init, which stays as the command's parent
// (launcher.InitProcess).
func (p *process) PidIsInit() bool { return true }

func (p *process) Enforcement() *sandboxdv1.EnforcementReport { return p.enforcement }

func (p *process) Signal(sig syscall.Signal) error {
	// The init forwards it to the command's process group.
	return p.proc.signal(sig)
}

func (p *process) Kill() error {
	// SIGKILL of the pid namespace's init kills every process in it; a
	// namespace-less init kills its descendants itself.
	var err error
	if p.namespaces {
		err = p.proc.signal(unix.SIGKILL)
	} else {
		err = p.proc.signal(sandboxinit.SigKillAll)
		if p.cgroup != nil {
			p.cgroup.killAll()
		}
	}
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

func (p *process) Wait() (launcher.Status, error) {
	p.waitOnce.Do(func() {
		st := launcher.Status{Signal: syscall.SIGKILL}
		for {
			m, err := p.next()
			if err != nil {
				break
			}
			if m.Type == "exit" {
				st = launcher.Status{ExitCode: m.Code, Signal: syscall.Signal(m.Signal)}
				break
			}
		}
		p.reportFile.Close()
		p.proc.wait()
		// The init is gone and with it every process of the sandbox:
		// nothing is left to call.
		if p.supervisor != nil {
			p.supervisor.stop()
		}
		if p.proxy != nil {
			p.proxy.Close()
		}
		for _, l := range p.forwards {
			l.Close()
		}
		if p.cgroup != nil && p.cgroup.end() {
			st.Limit = "limits.memory_bytes"
		}
		p.status = st
		p.cleanup()
	})
	return p.status, nil
}
