package launcherlinux

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"github.com/sandboxd/sandboxd/policy"
)

// Plan is everything the sandbox init applies, and what the daemon keeps
// for itself. The applier never looks at the policy again.
type Plan struct {
	Set MechanismSet `json:"set"`
	// Plan is what the init gets.
	sandboxinit.Plan
	// Report is derived from the same decisions as the steps above.
	Report []*sandboxdv1.FieldEnforcement `json:"-"`
	// Supervise is what the daemon needs to answer the seccomp listener's
	// notifications, nil when there is no listener. The init never sees
	// it.
	Supervise *Supervision `json:"-"`
	// DenialSources says which refusals the daemon records, and how.
	DenialSources []*sandboxdv1.DenialSource `json:"-"`
}

// Supervision is the daemon's side of a sandbox's seccomp listener.
type Supervision struct {
	// Connect: the sandbox has a private network namespace, and the
	// daemon performs each of its connect() calls.
	Connect bool `json:"connect,omitempty"`
	// SharedNetNS: the sandbox is in the host's network namespace, where
	// a unix listener's namespace says nothing about whose it is; the
	// daemon lets a connect reach only a listener a process of the session
	// holds, and performs the binds the filter notifies.
	SharedNetNS bool `json:"shared_netns,omitempty"`
	// Writes judges the write-intent calls the filter notifies.
	Writes *WriteModel `json:"writes"`
	// NoSetID: the filter notifies modes with set-ID bits, and openat2,
	// for the daemon to refuse and record (SeccompOptions.NoSetID).
	NoSetID bool `json:"no_set_id,omitempty"`
	// Emulate, for a sandbox without a mount namespace, says the daemon
	// performs its metadata calls (and lookups) in its place.
	Emulate *Emulation `json:"emulate,omitempty"`
}

// GetEmulate is sv's emulation, nil for a nil sv.
func (sv *Supervision) GetEmulate() *Emulation {
	if sv == nil {
		return nil
	}
	return sv.Emulate
}

// GetLookups says whether the daemon performs lookups; false for nil.
func (e *Emulation) GetLookups() bool { return e != nil && e.Lookups }

// Emulation is what the daemon needs to perform a sandbox's calls as the
// sandbox would: its identity, and whether lookups are the daemon's too.
type Emulation struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Lookups: the policy has deny paths, which only the daemon can keep
	// stat, access, readlink and xattr reads from seeing.
	Lookups bool `json:"lookups,omitempty"`
}

// GetWrites is sv's write model, nil for a nil sv.
func (sv *Supervision) GetWrites() *WriteModel {
	if sv == nil {
		return nil
	}
	return sv.Writes
}

// Host is what the planner needs to know about the machine; Start fills it
// from real probes, tests from literals.
type Host struct {
	// Set is the mechanism set Choose picked; "" means namespaces.
	Set         MechanismSet
	LandlockABI int
	// NoSeccomp says seccomp filters do not work here. Only the namespaces
	// set runs without them, and only for policies whose fields do not
	// rest on seccomp (Choose sees to that).
	NoSeccomp bool
	// Notify says seccomp user notification works here, with what the
	// daemon does with a listener (pidfd_getfd, process_vm_readv);
	// NotifyMissing says why not.
	Notify        bool
	NotifyMissing string
	// Exists reports whether a host path exists and is a directory.
	Exists func(path string) (exists, isDir bool)
	// CgroupV2 says which limit controllers are on the unified hierarchy
	// (the others are on v1), for the report.
	CgroupV2 map[string]bool
	// Passwd and Group are the sandbox's /etc/passwd and /etc/group, the
	// host's with an entry added for the sandbox uid and gid, "" where the
	// host's already name them (see identityFiles).
	Passwd, Group string
	// SharedPasswd and SharedGroup: the daemon sends a file holding
	// Passwd or Group, one for all its sessions with that content, which
	// the init binds instead of writing one of its own.
	SharedPasswd, SharedGroup bool
	// Idmapped are the write roots the daemon ID-maps so that their owner
	// is the sandbox uid inside (the namespaces set only).
	Idmapped []string
	// OpenToSandbox are the paths of the request's Protect whose modes
	// let the sandbox's uid and gid in: with no mount to hide them, the
	// landlock set keeps them out of its read rules (see openToSandbox).
	OpenToSandbox []string
}

// SessionSocketPath is where a sandbox of the namespaces set finds its
// session socket. The sandbox's /dev is always a tmpfs of its own, so the
// path can be made whatever the host has there.
const SessionSocketPath = "/dev/sandboxd.sock"

// procReadOnly and procMasked follow the container runtimes' defaults: kernel
// knobs stay readable but not writable, and files that leak host kernel state
// or allow host-wide actions are hidden.
var (
	procReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	procMasked   = []string{"/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/kmsg"}
	procMaskDirs = []string{"/proc/acpi", "/proc/scsi"}
	devNodes     = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
	// fixedMountSteps is at most how many mount steps a plan has whatever
	// its paths: the root, /etc/passwd and /etc/group, /proc and its
	// hidden parts, /dev with its nodes, devpts, shm and five links, the
	// session socket and /tmp.
	fixedMountSteps = 14 + len(procReadOnly) + len(procMasked) + len(procMaskDirs) + len(devNodes)
)

// BuildPlan turns the request in, whose policy is normalized, into the plan
// for host. It refuses (returning *launcher.Unenforceable) only for what
// this backend cannot enforce at all; host probing of missing primitives
// happens at apply time. The request's session socket, not the policy,
// says whether the sandbox gets one: the daemon makes it only for
// children.allow.
func BuildPlan(in launcher.PlanRequest, host Host) (*Plan, error) {
	p := in.Policy
	if err := refuseUnsupported(p); err != nil {
		return nil, err
	}
	if p.GetChildren().GetAllow() && in.SessionSocket == "" {
		return nil, &launcher.Unenforceable{
			Field: "children.allow", Mechanism: "a socket the daemon makes for the session",
			Found: "the daemon passed no session socket", Remedy: "start the session through a daemon that serves on a socket, or set children.allow to false",
		}
	}
	if err := checkLayers(p.GetFilesystem().GetLayer(), in.Layered, host.Set); err != nil {
		return nil, err
	}
	if err := refuseWithinDaemonState(p.GetFilesystem(), in); err != nil {
		return nil, err
	}
	if host.Set == SetLandlock {
		if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
			sf := allowlistShortfall
			return nil, &launcher.Unenforceable{Field: sf.field, Mechanism: sf.mechanism, Found: sf.found, Remedy: sf.remedy}
		}
		return buildLandlockPlan(in, host)
	}
	fs := p.GetFilesystem()
	plan := &Plan{Set: SetNamespaces, Plan: sandboxinit.Plan{
		Namespaces: true,
		NetNS:      p.GetNetwork().GetMode() != sandboxdv1.Network_HOST,
		Hostname:   "sandbox",
	}}
	if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
		plan.ProxyListen = launcher.ProxyAddress
		fwd, err := loopbackForwards(p.GetNetwork().GetAllow())
		if err != nil {
			return nil, err
		}
		plan.LoopbackForwards = fwd
	}
	// Room for the steps every plan has and about those a policy's paths
	// add (a placeholder and a bind, rebind or mask each; ancestors
	// pinned are rarer), made once: a step is over a hundred bytes, and
	// growing the list step by step copied it over again several times.
	plan.Mounts = make([]MountStep, 0, fixedMountSteps+len(fs.GetWrite())+len(fs.GetLayer())+
		2*(len(fs.GetReadOnly())+len(fs.GetDeny()))+len(in.HideSockets))
	add := func(s MountStep) { plan.Mounts = append(plan.Mounts, s) }

	add(MountStep{Kind: MountRootReadOnly, Source: "/", Target: "/", Field: "filesystem.read"})

	// Write roots go below the sandbox's own /proc, /dev and /tmp, so that
	// even a write root of "/" never shows the host's; a write root inside
	// one of those goes on top of it. A layered path is a write root whose
	// bind comes from its layer's merged directory: carve-outs, masks,
	// Landlock and the write model treat it as one.
	writes := slices.Concat(fs.GetWrite(), fs.GetLayer())
	var writesUnder, writesOver []string
	for _, w := range sortedByDepth(writes) {
		if strictlyWithinAny(w, systemMounts) {
			writesOver = append(writesOver, w)
		} else {
			writesUnder = append(writesUnder, w)
		}
	}
	// Carve-outs and deny paths inside a write root that do not exist yet get
	// a placeholder directory first: a mount needs something to cover, and
	// otherwise the sandbox could create them.
	// Never one at or beneath the daemon's own paths, though: the daemon
	// would make it there itself, on the host (a directory where its
	// journal expects files, which then fails its every start), at the
	// word of a policy, a child's too. Their masks below keep the sandbox
	// from whatever such a carve-out or deny path names, so it is dropped.
	daemonOwn := slices.Concat(in.HideSockets, in.Protect)
	ownMissing := func(c string) bool {
		ok, _ := host.Exists(c)
		return !ok && coveredBy(c, daemonOwn)
	}
	var placeholders []string
	for _, c := range append(append([]string{}, fs.GetReadOnly()...), fs.GetDeny()...) {
		if ok, _ := host.Exists(c); !ok && coveredBy(c, writes) && !coveredBy(c, daemonOwn) {
			placeholders = append(placeholders, c)
		}
	}
	sort.Strings(placeholders)
	// The daemon hands over, ready-made, the binds of ID-mapped write
	// roots and of layers: a layer's merged directory is the daemon's,
	// beneath its state directory, where the init may not reach it. To the
	// init a layer's bind is then one of a write root at its path, and a
	// placeholder inside it is made through the mount handed over.
	passed := func(w string) bool { return slices.Contains(host.Idmapped, w) || slices.Contains(in.Layered, w) }
	for _, c := range placeholders {
		st := MountStep{Kind: MountPlaceholder, Source: c, Field: fieldOf(fs, c)}
		if r := innermostRoot(c, writes); passed(r) {
			st.Via = r
		}
		add(st)
	}
	bind := func(w string) MountStep {
		field := "filesystem.write"
		if slices.Contains(in.Layered, w) {
			field = "filesystem.layer"
		}
		return MountStep{Kind: MountBind, Source: w, Target: w, Field: field, Idmapped: passed(w)}
	}
	for _, w := range writesUnder {
		add(bind(w))
	}
	// Over whatever write root holds them, under any carve-out or mask
	// of the policy's.
	identityFile := func(target, content string, shared bool) {
		switch {
		case content == "":
		case shared:
			add(MountStep{Kind: MountFile, Target: target, Shared: true, Field: "process"})
		default:
			add(MountStep{Kind: MountFile, Target: target, Content: content, Field: "process"})
		}
	}
	identityFile("/etc/passwd", host.Passwd, host.SharedPasswd)
	identityFile("/etc/group", host.Group, host.SharedGroup)

	add(MountStep{Kind: MountProc, Target: "/proc", Field: "process"})
	for _, d := range procReadOnly {
		add(MountStep{Kind: MountRebindReadOnly, Target: d, Optional: true, Field: "process"})
	}
	for _, f := range procMasked {
		add(MountStep{Kind: MountMaskFile, Target: f, Optional: true, Field: "process"})
	}
	for _, d := range procMaskDirs {
		add(MountStep{Kind: MountTmpfs, Target: d, ReadOnly: true, Optional: true, Field: "process"})
	}

	add(MountStep{Kind: MountTmpfs, Target: "/dev", Mode: 0o755, Field: "process"})
	for _, n := range devNodes {
		add(MountStep{Kind: MountDevice, Source: n, Target: n, Field: "process"})
	}
	add(MountStep{Kind: MountDevpts, Target: "/dev/pts", Field: "process"})
	add(MountStep{Kind: MountTmpfs, Target: "/dev/shm", Mode: 0o1777, Field: "filesystem.write"})
	for _, l := range [][2]string{{"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		add(MountStep{Kind: MountSymlink, Source: l[0], Target: l[1], Field: "process"})
	}
	if in.SessionSocket != "" {
		// A bind of the socket inode: connecting to it reaches the
		// daemon's listener, while its host directory stays masked below.
		add(MountStep{Kind: MountBind, Source: in.SessionSocket, Target: SessionSocketPath, Field: "children.allow"})
	}

	privateTmp := !coveredBy("/tmp", writes)
	if privateTmp {
		add(MountStep{Kind: MountTmpfs, Target: "/tmp", Mode: 0o1777, Field: "filesystem.write"})
	}
	for _, w := range writesOver {
		add(bind(w))
	}

	pinned := map[string]bool{}
	for _, c := range sortedByDepth(fs.GetReadOnly()) {
		if ownMissing(c) {
			continue
		}
		root := innermostRoot(c, writes)
		for _, a := range ancestorsBetween(root, c) {
			if !pinned[a] {
				pinned[a] = true
				add(MountStep{Kind: MountPin, Target: a, Field: "filesystem.read_only"})
			}
		}
		add(MountStep{Kind: MountRebindReadOnly, Target: c, Field: "filesystem.read_only"})
	}

	for _, d := range sortedByDepth(fs.GetDeny()) {
		if ownMissing(d) {
			continue
		}
		// As for carve-outs: a deny path whose ancestors could be renamed
		// could be moved out from under its mask and read later.
		for _, a := range ancestorsBetween(innermostRoot(d, writes), d) {
			if !pinned[a] {
				pinned[a] = true
				add(MountStep{Kind: MountPin, Target: a, Field: "filesystem.deny"})
			}
		}
		exists, isDir := host.Exists(d)
		if !exists && coveredBy(d, writes) {
			exists, isDir = true, true
		}
		switch {
		case !exists:
			// Outside every write root a missing path cannot be created, so
			// there is nothing to read or write.
		case isDir:
			add(MountStep{Kind: MountTmpfs, Target: d, Mode: 0, ReadOnly: true, Field: "filesystem.deny"})
		default:
			add(MountStep{Kind: MountMaskFile, Target: d, Field: "filesystem.deny"})
		}
	}

	// Outermost first: a socket inside a directory already masked (the
	// main socket beside or beneath the session sockets' directory) is
	// gone from the sandbox's view and needs no mask of its own. The
	// daemon's state directory is masked as they are, over any write
	// root, so that a grant of "/" or of a home holding it still works.
	var masked []string
	for _, s := range sortedByDepth(daemonOwn) {
		ok, isDir := host.Exists(s)
		if !ok && coveredBy(s, writes) && !coveredBy(s, masked) {
			// The daemon makes its directories before it serves: one gone
			// now, the sandbox could make it (or a symlink there) and the
			// daemon would use the sandbox's.
			return nil, &launcher.Unenforceable{
				Field: "filesystem.write", Mechanism: "a mask over the daemon's own state and sockets",
				Found:  fmt.Sprintf("%s, which the daemon keeps from every sandbox, is missing beneath write root %s", s, innermostRoot(s, writes)),
				Remedy: "restart the daemon, which makes its state and socket directories, or name write roots that do not hold them",
			}
		}
		if !ok || coveredBy(s, masked) {
			// The daemon passes absolute paths; one the sandbox's view does
			// not have (under its private /tmp) needs no hiding.
			continue
		}
		// As for a deny path: a directory on the way renamed, the mask
		// would go with it, and the sandbox could make one of its own
		// where the daemon looks (a journal naming what to remove, a
		// socket that clients take for the daemon's).
		for _, a := range ancestorsBetween(innermostRoot(s, writes), s) {
			if !pinned[a] {
				pinned[a] = true
				add(MountStep{Kind: MountPin, Target: a, Field: "process"})
			}
		}
		if isDir {
			masked = append(masked, s)
			add(MountStep{Kind: MountTmpfs, Target: s, Mode: 0, ReadOnly: true, Optional: true, Field: "process"})
		} else {
			add(MountStep{Kind: MountMaskFile, Target: s, Optional: true, Field: "process"})
		}
	}

	var denyRead []string
	for _, d := range fs.GetDeny() {
		// Inside a write root (or the private /tmp) the write rule covers
		// the path again; there the mount mask is the only layer.
		if !coveredBy(d, writes) && !(privateTmp && within(d, "/tmp")) {
			denyRead = append(denyRead, d)
		}
	}
	ll := planLandlock(host.LandlockABI, writes, privateTmp, plan.NetNS, denyRead)
	// In a private network namespace a unix socket is the one way out, and
	// the session socket must be reachable through one: the daemon performs
	// each connect() itself, and only to that socket.
	sessionSocket := plan.NetNS && in.SessionSocket != ""
	notify := host.Notify && !host.NoSeccomp
	// With the daemon performing every connect, a unix stream socket
	// reaches nothing the policy refuses, and a program that tries a
	// socket that is not there (glibc's user lookups try nscd's first)
	// sees what it would see on a host without one, not a refusal.
	unixStream := plan.NetNS && notify
	if sessionSocket && !notify {
		return nil, &launcher.Unenforceable{
			Field: "children.allow", Mechanism: "seccomp user notification, so that the daemon performs the sandbox's connect() to its session socket",
			Found: "seccomp user notification does not work here: " + host.NotifyMissing, Remedy: remedyNotify,
		}
	}
	// What the sandbox makes in an ID-mapped write root is owned on the
	// host by the root's owner: it must not leave a set-ID file there.
	noSetID := len(host.Idmapped) > 0
	var prog []SockFilter
	if !host.NoSeccomp {
		var err error
		if prog, err = SeccompProgram(SeccompOptions{RestrictSocketFamilies: plan.NetNS, Notify: notify, NotifyConnect: notify && plan.NetNS, UnixStream: unixStream, NoSetID: noSetID}); err != nil {
			return nil, err
		}
	} else if plan.NetNS {
		return nil, &launcher.Unenforceable{Field: "network.mode", Mechanism: "seccomp for unix sockets", Found: "seccomp filters do not work here", Remedy: remedySeccomp}
	} else if noSetID {
		return nil, &launcher.Unenforceable{
			Field: "filesystem.write", Mechanism: "seccomp, so that no set-user-ID or set-group-ID file is made in an ID-mapped write root (owned there by " + host.Idmapped[0] + "'s owner)",
			Found: "seccomp filters do not work here", Remedy: remedySeccomp + ", or make the write root the sandbox uid's",
		}
	}
	if notify {
		plan.Supervise = &Supervision{Connect: plan.NetNS, Writes: buildWriteModel(plan.Mounts, ll, fs.GetReadOnly(), fs.GetDeny()), NoSetID: noSetID}
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = "/"
	}
	// The mask would stop the init's chdir, which would read as a cwd
	// the sandbox uid may not search, blaming the directory's modes.
	if err := cwdInDeny(fs, cwd); err != nil {
		return nil, err
	}
	plan.Exec = ExecPlan{
		Argv: in.Argv, Env: in.Env, Cwd: cwd, WriteRoots: usableRoots(writes),
		UID: in.UID, GID: in.GID, Terminal: in.Terminal, Rows: in.Rows, Cols: in.Cols,
		Landlock: ll, Seccomp: prog, Listener: notify,
	}
	plan.Report = append(report(p, plan, host.Idmapped, len(fs.GetDeny()) > 0, in.SessionSocket != ""), limitsReport(p, host)...)
	plan.DenialSources = append(denialSources(plan, host, p.GetNetwork().GetMode() != sandboxdv1.Network_HOST), limitDenialSources(p)...)
	if plan.ProxyListen != "" {
		plan.DenialSources = append(plan.DenialSources, &sandboxdv1.DenialSource{Kind: "network.allow", Observed: true,
			How: "the daemon's proxy records every connection it refuses (host:port and why); the 403 or SOCKS reply tells the client"})
	}
	return plan, nil
}

// loopbackForwards are the ports of allow entries that name the host's
// 127.0.0.1, or localhost. Default clients never ask the proxy for them
// (NO_PROXY lists the loopback, which is the sandbox's own), so the
// sandbox's 127.0.0.1 at each such port leads to the host's instead: a
// model server on the host's loopback is reached at the address a client
// is configured with.
func loopbackForwards(allow []*sandboxdv1.NetworkAllow) ([]uint16, error) {
	var ports []uint16
	proxy := netip.MustParseAddrPort(launcher.ProxyAddress)
	for _, a := range allow {
		if a.GetHost() != "127.0.0.1" && a.GetHost() != "localhost" || a.GetPort() == 0 {
			continue
		}
		port := uint16(a.GetPort())
		if port == proxy.Port() {
			return nil, &launcher.Unenforceable{
				Field: "network.allow", Mechanism: "the sandbox's 127.0.0.1:" + strconv.Itoa(int(port)) + " leading to the host's",
				Found:  "the sandbox reaches the daemon's proxy at " + launcher.ProxyAddress,
				Remedy: "serve the host's service on another port, or reach it through the proxy by another address of the host",
			}
		}
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	return ports, nil
}

// idmapReport names the write roots whose owner the sandbox sees as its
// own uid.
func idmapReport(plan *Plan, idmapped []string) string {
	var mapped []string
	for _, s := range plan.Mounts {
		if s.Idmapped && s.Field == "filesystem.write" && slices.Contains(idmapped, s.Target) {
			mapped = append(mapped, s.Source)
		}
	}
	if len(mapped) == 0 {
		return ""
	}
	return fmt.Sprintf(" (ID-mapped, its owner shown as uid %d and files created kept as the owner's on the host: %s)", plan.Exec.UID, strings.Join(mapped, ", "))
}

// usableRoots are the write roots the sandbox must be able to write
// itself. Not "/": a grant of the whole tree is one to write wherever the
// sandbox's uid may, which no one directory stands for.
func usableRoots(writes []string) []string {
	var out []string
	for _, w := range writes {
		if w != "/" {
			out = append(out, w)
		}
	}
	return out
}

func fieldOf(fs *sandboxdv1.Filesystem, path string) string {
	for _, d := range fs.GetDeny() {
		if d == path {
			return "filesystem.deny"
		}
	}
	return "filesystem.read_only"
}

// systemMounts are the sandbox's own filesystems that no host mount may
// cover.
var systemMounts = []string{"/proc", "/dev", "/tmp"}

func strictlyWithinAny(path string, roots []string) bool {
	for _, r := range roots {
		if path != r && within(path, r) {
			return true
		}
	}
	return false
}

// coveredBy reports whether path is one of roots or beneath one.
func coveredBy(path string, roots []string) bool {
	return innermostRoot(path, roots) != ""
}

// innermostRoot and within are policy's path algebra, with the rules of
// the paths a Linux plan holds.
var (
	innermostRoot = policy.Unix.Innermost
	within        = policy.Unix.Within
)

// ancestorsBetween lists the directories strictly between root and path, from
// the outermost in.
func ancestorsBetween(root, path string) []string {
	if root == "" {
		return nil
	}
	var out []string
	for d := filepath.Dir(path); d != root && within(d, root) && d != "/"; d = filepath.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

func sortedByDepth(paths []string) []string {
	out := append([]string(nil), paths...)
	sort.SliceStable(out, func(i, j int) bool {
		di, dj := strings.Count(out[i], "/"), strings.Count(out[j], "/")
		if out[i] == "/" {
			di = 0
		}
		if out[j] == "/" {
			dj = 0
		}
		if di != dj {
			return di < dj
		}
		return out[i] < out[j]
	})
	return out
}

func report(p *sandboxdv1.Policy, plan *Plan, idmapped []string, hasDeny, sessionSocket bool) []*sandboxdv1.FieldEnforcement {
	ll := "landlock unavailable"
	if plan.Exec.Landlock.ABI > 0 {
		ll = fmt.Sprintf("landlock abi %d", plan.Exec.Landlock.ABI)
	}
	f := func(field, mech string) *sandboxdv1.FieldEnforcement {
		return &sandboxdv1.FieldEnforcement{Field: field, Mechanism: mech}
	}
	out := []*sandboxdv1.FieldEnforcement{
		f("filesystem.read", "mount-ns read-only clone of / + "+ll),
		f("filesystem.write", "mount-ns read-write binds"+idmapReport(plan, idmapped)+" + "+ll),
	}
	if len(p.GetFilesystem().GetLayer()) > 0 {
		out = append(out, f("filesystem.layer", "copy-on-write: an overlay the daemon mounted in its layer store, with the host path (ID-mapped when its owner is not the sandbox uid) as its lowest layer, bound read-write in the path's place (mount-ns) + "+ll+"; the host path is written only by a commit"))
	}
	if len(p.GetFilesystem().GetReadOnly()) > 0 {
		out = append(out, f("filesystem.read_only", "mount-ns read-only rebinds, ancestors pinned as mount points (landlock cannot subtract)"))
	} else {
		out = append(out, f("filesystem.read_only", "none requested"))
	}
	if hasDeny {
		mech := "mount-ns masks: empty read-only directory or file"
		if len(plan.Exec.Landlock.ReadExcept) > 0 {
			mech += " + " + ll + " (outside write roots, below listable directories)"
		}
		out = append(out, f("filesystem.deny", mech))
	} else {
		out = append(out, f("filesystem.deny", "none requested"))
	}
	unixStream := plan.NetNS && plan.Exec.Listener
	switch {
	case unixStream:
		out = append(out, f("network.mode", "net-ns with private loopback + seccomp socket families inet, inet6, netlink and unix stream; the daemon performs every connect (seccomp user notification): a unix socket reaches the session socket and sockets the sandbox itself listens on (abstract names live in its own network namespace; a path only through the inode a listener of that namespace is bound to), a path where nothing is fails with ENOENT, any other is refused with ECONNREFUSED"))
	case plan.NetNS:
		out = append(out, f("network.mode", "net-ns with private loopback + seccomp socket families inet, inet6, netlink"))
	default:
		out = append(out, f("network.mode", "host network"))
	}
	if plan.ProxyListen != "" {
		mech := "net-ns whose only way out is the daemon's proxy at " + plan.ProxyListen +
			" (HTTP CONNECT, HTTP forward, SOCKS5): each connection checked against the host patterns and ports, names resolved by the daemon, loopback and link-local answers refused"
		for _, port := range plan.LoopbackForwards {
			mech += fmt.Sprintf("; the sandbox's 127.0.0.1:%d leads to the host's, which network.allow names", port)
		}
		out = append(out, f("network.allow", mech))
	}
	sc := "seccomp deny-list"
	if len(plan.Exec.Seccomp) == 0 {
		sc = "no seccomp (unavailable here; no field rests on it)"
	}
	if plan.Exec.Landlock.Scoped != 0 {
		sc += " + landlock signal scope"
	}
	out = append(out,
		f("process", fmt.Sprintf("user-ns (host uid %d, not root), pid/ipc/uts/cgroup-ns, no_new_privs, no capabilities, setsid, %s", plan.Exec.UID, sc)),
	)
	if p.GetLimits().GetTimeout() != nil {
		out = append(out, f("limits.timeout", "daemon wall-clock timer, SIGKILL of the sandbox"))
	}
	if sessionSocket {
		mech := "session socket bound at " + SessionSocketPath + "; other daemon sockets masked"
		if unixStream {
			mech += "; the daemon performs each connect() (seccomp user notification): a unix socket reaches only " + SessionSocketPath + ", any other path is refused with ECONNREFUSED"
		}
		out = append(out, f("children.allow", mech))
	}
	return out
}

// limitsReport says how the limits are enforced, the same whatever the
// mechanism set.
func limitsReport(p *sandboxdv1.Policy, host Host) []*sandboxdv1.FieldEnforcement {
	out := limitMechanisms(p.GetLimits(), host.CgroupV2)
	if n := p.GetLimits().GetOutputBytes(); n != 0 {
		out = append(out, &sandboxdv1.FieldEnforcement{Field: "limits.output_bytes", Mechanism: fmt.Sprintf("daemon output accounting: output beyond %d bytes is dropped after a marker; the command runs on", n)})
	}
	return out
}

// checkLayers refuses layered paths this launch has no layer for, and
// layers on the landlock set, which has no mount namespace to show a
// layer in the path's place.
func checkLayers(paths, layered []string, set MechanismSet) error {
	for _, l := range paths {
		switch {
		case set == SetLandlock:
			return &launcher.Unenforceable{
				Field: "filesystem.layer", Mechanism: "a mount namespace in which the layer's merged directory stands in " + l + "'s place",
				Found:  "the landlock mechanism set has no mount namespace",
				Remedy: "allow user namespaces so that the namespaces set runs the session, or use --write on a copy of " + l,
			}
		case !slices.Contains(layered, l):
			return &launcher.Unenforceable{
				Field: "filesystem.layer", Mechanism: "a copy-on-write layer of " + l + " made by the daemon",
				Found: "the caller passed the backend no layer for it", Remedy: "start the session through sandboxd, which makes the layers",
			}
		}
	}
	return nil
}

// cwdInDeny refuses a cwd inside a deny path, naming it. The cwd is
// cleaned as the kernel resolves it (/home/u/x/../.ssh enters .ssh); one
// that a symlink leads there the init judges after its chdir.
func cwdInDeny(fs *sandboxdv1.Filesystem, cwd string) error {
	clean := filepath.Clean(cwd)
	for i, d := range fs.GetDeny() {
		if within(clean, d) {
			return &policy.FieldError{Field: policy.Index(policy.FieldFilesystemDeny, i), Msg: fmt.Sprintf("%s holds the command's cwd %s, which the sandbox may not enter", d, cwd)}
		}
	}
	return nil
}
