package launcherlinux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// detectCgroups reads the daemon's mounts and cgroup membership. It
// changes nothing: a controller is usable when its hierarchy is mounted,
// and the daemon may create cgroups beneath its own (root, or a delegated
// subtree).
func detectCgroups() *cgroupHost {
	h := &cgroupHost{ctl: map[string]*hierarchy{}, missing: map[string]string{}}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		for _, c := range limitControllerNames {
			h.missing[c] = fmt.Sprintf("read /proc/self/mountinfo: %v", err)
		}
		return h
	}
	member, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		for _, c := range limitControllerNames {
			h.missing[c] = fmt.Sprintf("read /proc/self/cgroup: %v", err)
		}
		return h
	}
	v1, v2 := parseCgroupMounts(mounts)
	paths := parseCgroupMembership(member)
	for _, c := range limitControllerNames {
		switch {
		case v1[c] != "":
			h.ctl[c] = &hierarchy{mount: v1[c], own: filepath.Join(v1[c], paths[c])}
		case v2 != "" && v2Has(v2, paths[""], c):
			h.ctl[c] = &hierarchy{v2: true, mount: v2, own: filepath.Join(v2, paths[""])}
		default:
			h.missing[c] = fmt.Sprintf("no cgroup hierarchy has the %s controller", c)
			continue
		}
		if os.Geteuid() != 0 {
			if err := unix.Access(filepath.Join(h.ctl[c].own, "cgroup.procs"), unix.W_OK); err != nil {
				h.missing[c] = fmt.Sprintf("the daemon's cgroup %s is not delegated to it: %v", h.ctl[c].own, err)
				delete(h.ctl, c)
			}
		}
	}
	return h
}

// parseCgroupMounts finds the v1 hierarchy of each controller and the v2
// mount, from mountinfo.
func parseCgroupMounts(mountinfo []byte) (v1 map[string]string, v2 string) {
	v1 = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = unescapeMount(f[4])
			}
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				if slices.Contains(limitControllerNames, opt) && v1[opt] == "" {
					v1[opt] = unescapeMount(f[4])
				}
			}
		}
	}
	return v1, v2
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseCgroupMembership maps each v1 controller, and "" for v2, to the
// daemon's cgroup path in it.
func parseCgroupMembership(b []byte) map[string]string {
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	return paths
}

// v2Has says whether controller c is available to the daemon's cgroup in
// the v2 hierarchy mounted at mount.
func v2Has(mount, own, c string) bool {
	b, err := os.ReadFile(filepath.Join(mount, own, "cgroup.controllers"))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Fields(string(b)), c)
}

// cgroups makes the sessions' cgroups. Each session that sets a limit,
// or whose parent session has a cgroup, gets a directory per hierarchy,
// beneath its parent's when it has one (so a child is counted in its
// parent's budget), with a leaf "sandbox" that holds its processes: a v2
// cgroup with processes cannot have children with controllers.
type cgroups struct {
	host *cgroupHost

	mu       sync.Mutex
	bases    map[string]string // mount -> the daemon's directory in it
	baseErr  error
	sessions map[string]*sessionCgroup
	// journal records the bases; entries are their entries, by directory.
	journal *journal
	entries map[string]string
}

func newCgroups(h *cgroupHost) *cgroups {
	return &cgroups{host: h, sessions: map[string]*sessionCgroup{}}
}

// cgroupLeaf holds a session's own processes.
const cgroupLeaf = "sandbox"

// base returns the daemon's directory in each hierarchy it uses, making
// them on first use. On v1 it is a child of the daemon's own cgroup; on v2
// it is too when the daemon's cgroup can hand controllers down (a
// delegated subtree the daemon is alone in, which it then leaves for a
// leaf of its own), else, for root, a cgroup of its own at the top.
func (g *cgroups) base() (map[string]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bases != nil || g.baseErr != nil {
		return g.bases, g.baseErr
	}
	bases := map[string]string{}
	name := "sandboxd-" + strconv.Itoa(os.Getpid())
	for _, c := range limitControllerNames {
		hy := g.host.ctl[c]
		if hy == nil || bases[hy.mount] != "" {
			continue
		}
		var dir string
		var err error
		if hy.v2 {
			dir, err = v2Base(hy, name)
		} else {
			sweepStale(hy.own)
			dir = filepath.Join(hy.own, name)
			err = mkdirCgroup(dir)
		}
		if err != nil {
			g.baseErr = err
			return nil, err
		}
		bases[hy.mount] = dir
		if g.entries == nil {
			g.entries = map[string]string{}
		}
		g.entries[dir] = g.journal.record(journalEntry{Kind: entryCgroup, Path: []byte(dir)})
	}
	g.bases = bases
	return bases, nil
}

// v2Base prepares the daemon's v2 directory and enables the limit
// controllers for its children. A v2 cgroup that holds processes cannot
// hand controllers down, so the directory goes where one can: in the
// daemon's own cgroup when the daemon is alone there (a systemd unit with
// Delegate=yes), after moving itself into a leaf; else beside it, in a
// parent that was delegated with its controllers enabled (how the rootless
// test runs it); else, for root, in a cgroup of its own at the top.
func v2Base(hy *hierarchy, name string) (string, error) {
	enable := func(dir string) error {
		return writeCgroupFile(dir, "cgroup.subtree_control", "+memory +pids +cpu")
	}
	own := hy.own
	procs, err := os.ReadFile(filepath.Join(own, "cgroup.procs"))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Join(own, "cgroup.procs"), err)
	}
	parent := own
	switch alone := strings.TrimSpace(string(procs)) == strconv.Itoa(os.Getpid()); {
	case own == hy.mount:
	case alone:
		leaf := filepath.Join(own, "daemon")
		if err := mkdirCgroup(leaf); err != nil {
			return "", err
		}
		if err := writeCgroupFile(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
			return "", err
		}
	case unix.Access(filepath.Join(filepath.Dir(own), "cgroup.procs"), unix.W_OK) == nil && filepath.Dir(own) != hy.mount:
		parent = filepath.Dir(own)
	case os.Geteuid() == 0:
		parent = filepath.Join(hy.mount, "sandboxd")
		if err := mkdirCgroup(parent); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("cgroup %s holds other processes and its parent is not delegated, so no cgroup can hand controllers down: %w (start sandboxd in a cgroup of its own, e.g. systemd-run --user -p Delegate=yes)", own, unix.EBUSY)
	}
	if err := enable(parent); err != nil {
		return "", err
	}
	sweepStale(parent)
	dir := filepath.Join(parent, name)
	if err := mkdirCgroup(dir); err != nil {
		return "", err
	}
	return dir, enable(dir)
}

// sweepStale removes what earlier daemons that died left in dir: their
// cgroups are empty once their sandboxes are gone.
func sweepStale(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, ok := strings.CutPrefix(e.Name(), "sandboxd-")
		if !ok || !e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() || unix.Kill(n, 0) == nil {
			continue
		}
		removeCgroupTree(filepath.Join(dir, e.Name()))
	}
}

func mkdirCgroup(dir string) error {
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return nil
}

func writeCgroupFile(dir, file, value string) error {
	path := filepath.Join(dir, file)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(value); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

// removeCgroupTree removes dir and every cgroup beneath it, deepest first.
// A cgroup whose last process is still exiting is busy for a moment.
func removeCgroupTree(dir string) error {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var last error
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; ; try++ {
			err := unix.Rmdir(dirs[i])
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || try == 50 {
				last = fmt.Errorf("rmdir %s: %w", dirs[i], err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return last
}

// close removes the daemon's directories, which are empty once its
// sessions are gone; a session still running keeps them (and the next
// daemon's sweep removes them).
func (g *cgroups) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, dir := range g.bases {
		unix.Rmdir(dir)
	}
	// An entry whose directory a running session still holds stays, for
	// the next daemon to remove.
	for dir, e := range g.entries {
		if _, err := os.Lstat(dir); err != nil {
			g.journal.forget(e)
		}
	}
	g.bases, g.entries = nil, nil
}

// sessionCgroup is one session's cgroups.
type sessionCgroup struct {
	id     string
	limits *sandboxdv1.Limits
	v2     map[string]bool
	// dirs is the session's directory per controller, leaves the leaf
	// of each distinct hierarchy.
	dirs   map[string]string
	leaves []cgroupLeafDir
	owner  *cgroups

	onDenial func(*sandboxdv1.Denial)
	// oom is set once the memory limit killed something.
	mu      sync.Mutex
	oom     bool
	stop    chan struct{}
	stopped sync.WaitGroup
	ended   sync.Once
	oomEnd  bool
}

// create makes the cgroups of session id and writes its limits. It
// returns nil when the session needs none: no limit of its own and no
// parent with a cgroup.
func (g *cgroups) create(id, parent string, l *sandboxdv1.Limits, onDenial func(*sandboxdv1.Denial)) (*sessionCgroup, error) {
	if g == nil {
		// A backend made without New has looked for no controller.
		g = newCgroups(&cgroupHost{missing: map[string]string{ctlMemory: "not probed", ctlPids: "not probed", ctlCPU: "not probed"}})
	}
	g.mu.Lock()
	par := g.sessions[parent]
	g.mu.Unlock()
	ctls := limitControllers(l)
	if len(ctls) == 0 && par == nil {
		return nil, nil
	}
	if id == "" || id == "." || id == ".." || strings.Contains(id, "/") {
		// The id names a directory beside other sessions'; anything else
		// would write limits onto the daemon's own cgroup or another's.
		return nil, cgroupRefusal(ctls, fmt.Errorf("session id %q cannot name a cgroup", id))
	}
	for _, c := range ctls {
		if g.host.ctl[c] == nil {
			return nil, &launcher.Unenforceable{
				Field: limitField(c), Mechanism: "the cgroup " + c + " controller",
				Found: g.host.missing[c], Probe: "find the " + c + " controller's hierarchy and the daemon's cgroup in it",
				Remedy: remedyCgroup,
			}
		}
	}
	bases, err := g.base()
	if err != nil {
		return nil, cgroupRefusal(ctls, err)
	}
	sc := &sessionCgroup{id: id, limits: l, v2: g.host.v2Set(), dirs: map[string]string{}, owner: g, onDenial: onDenial, stop: make(chan struct{})}
	made := map[string]string{}
	fail := func(err error) (*sessionCgroup, error) {
		for _, dir := range made {
			removeCgroupTree(dir)
		}
		return nil, cgroupRefusal(ctls, err)
	}
	// Every hierarchy the daemon uses gets the session, limited there or
	// not: a child must stay within each of its parent's limits.
	for _, c := range limitControllerNames {
		hy := g.host.ctl[c]
		if hy == nil {
			continue
		}
		if dir, ok := made[hy.mount]; ok {
			sc.dirs[c] = dir
			continue
		}
		parentDir := bases[hy.mount]
		if par != nil && par.dirs[c] != "" {
			parentDir = par.dirs[c]
		}
		dir := filepath.Join(parentDir, id)
		if err := mkdirCgroup(dir); err != nil {
			return fail(err)
		}
		made[hy.mount] = dir
		sc.dirs[c] = dir
		if hy.v2 {
			if err := writeCgroupFile(dir, "cgroup.subtree_control", "+memory +pids +cpu"); err != nil {
				return fail(err)
			}
		}
		leaf := filepath.Join(dir, cgroupLeaf)
		if err := mkdirCgroup(leaf); err != nil {
			return fail(err)
		}
		sc.leaves = append(sc.leaves, cgroupLeafDir{dir: leaf, v2: hy.v2})
	}
	for _, s := range cgroupSettings(l, sc.v2) {
		dir := sc.dirs[s.Controller]
		if _, err := os.Stat(filepath.Join(dir, s.File)); s.Optional && errors.Is(err, os.ErrNotExist) {
			if hostHasSwap() {
				// The limit would not count swap: the sandbox could
				// hold more than it asks, paged out.
				return fail(fmt.Errorf("%s: swap is enabled but not accounted per cgroup (boot with swapaccount=1, or turn swap off): %w", filepath.Join(dir, s.File), unix.EOPNOTSUPP))
			}
			continue
		}
		if err := writeCgroupFile(dir, s.File, s.Value); err != nil {
			return fail(err)
		}
	}
	g.mu.Lock()
	g.sessions[id] = sc
	g.mu.Unlock()
	return sc, nil
}

func cgroupRefusal(ctls []string, err error) error {
	field := "limits"
	if len(ctls) > 0 {
		field = limitField(ctls[0])
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	return &launcher.Unenforceable{
		Field: field, Mechanism: "a cgroup for the session", Found: err.Error(), Errno: errno,
		Probe: "mkdir and write the session's cgroup", Remedy: remedyCgroup,
	}
}

// cgroupLeafDir is the leaf of one hierarchy.
type cgroupLeafDir struct {
	dir string
	v2  bool
}

// refusal is the refusal for a failure in leaf l, naming its controllers.
func (sc *sessionCgroup) refusal(l cgroupLeafDir, err error) error {
	var ctls []string
	for c, d := range sc.dirs {
		if within(l.dir, d) {
			ctls = append(ctls, c)
		}
	}
	slices.Sort(ctls)
	return cgroupRefusal(ctls, err)
}

// join moves pid, the session's init, into the session's v2 leaves, where
// only a whole process can move. The init has not started the command
// yet, so every process of the sandbox is created inside.
func (sc *sessionCgroup) join(pid int) error {
	for _, l := range sc.leaves {
		if !l.v2 {
			continue
		}
		if err := writeCgroupFile(l.dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return sc.refusal(l, err)
		}
	}
	return nil
}

// tasksFiles opens the tasks file of each v1 leaf, for the init's thread
// that forks the command to move itself into (v1 moves single threads):
// the init stays out of the limits. The caller closes them.
func (sc *sessionCgroup) tasksFiles() ([]int, error) {
	var fds []int
	for _, l := range sc.leaves {
		if l.v2 {
			continue
		}
		fd, err := unix.Open(filepath.Join(l.dir, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range fds {
				unix.Close(f)
			}
			return nil, sc.refusal(l, fmt.Errorf("open %s: %w", filepath.Join(l.dir, "tasks"), err))
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// watch reports the limits the sandbox runs into as they happen: a fork
// refused by pids.max (at most one denial a second, with the running
// count), and an OOM kill, after which kill ends the whole session, as a
// v2 OOM group would.
func (sc *sessionCgroup) watch(kill func()) {
	if d := sc.dirs[ctlPids]; d != "" && sc.limits.GetPids() != 0 {
		sc.stopped.Go(func() { sc.watchPids(d) })
	}
	if d := sc.dirs[ctlMemory]; d != "" && sc.limits.GetMemoryBytes() != 0 {
		sc.stopped.Go(func() { sc.watchMemory(kill) })
	}
}

// cgroupPoll is how often a session's event counters are read. Reading two
// small files is cheap, and a fork bomb or an OOM shows within it.
const cgroupPoll = 100 * time.Millisecond

func (sc *sessionCgroup) watchPids(dir string) {
	// The forks refused in the session's own leaf: v1 counts them only
	// there, v2 there as pids.events.local (since Linux 6.13), else at
	// the cgroup whose limit refused them and its ancestors, where a
	// child session's own limit would count too.
	leaf := filepath.Join(dir, cgroupLeaf)
	events := filepath.Join(leaf, "pids.events")
	if sc.v2[ctlPids] {
		events = filepath.Join(leaf, "pids.events.local")
		if _, err := os.Stat(events); err != nil {
			events = filepath.Join(dir, "pids.events")
		}
	}
	var seen uint64
	var last time.Time
	check := func(final bool) {
		n := eventCount(events, "max")
		if n <= seen || !final && time.Since(last) < time.Second {
			return
		}
		seen, last = n, time.Now()
		sc.deny(&sandboxdv1.Denial{
			Field: "limits.pids", Operation: "fork", Errno: "EAGAIN",
			Detail: fmt.Sprintf("pids.max %d reached; %d forks refused so far", sc.limits.GetPids(), n),
		})
	}
	t := time.NewTicker(cgroupPoll)
	defer t.Stop()
	for {
		select {
		case <-sc.stop:
			// A bomb shorter than a poll is still reported.
			check(true)
			return
		case <-t.C:
			check(false)
		}
	}
}

func (sc *sessionCgroup) watchMemory(kill func()) {
	t := time.NewTicker(cgroupPoll)
	defer t.Stop()
	for {
		final := false
		select {
		case <-sc.stop:
			// A hog killed faster than a poll is still reported.
			final = true
		case <-t.C:
		}
		if sc.oomKills() == 0 {
			if final {
				return
			}
			continue
		}
		sc.mu.Lock()
		sc.oom = true
		sc.mu.Unlock()
		sc.deny(&sandboxdv1.Denial{
			Field: "limits.memory_bytes", Operation: "oom-kill", Errno: "ENOMEM",
			Detail: fmt.Sprintf("memory limit %d bytes reached; the session is killed", sc.limits.GetMemoryBytes()),
		})
		if !final {
			kill()
		}
		return
	}
}

// oomKills counts the OOM kills that hit the session itself, not a child
// session beneath it, which ends on its own: on v1 the victims in its
// leaf, on v2 also its OOM group killed as a whole.
func (sc *sessionCgroup) oomKills() uint64 {
	dir := sc.dirs[ctlMemory]
	leaf := filepath.Join(dir, cgroupLeaf)
	if sc.v2[ctlMemory] {
		return eventCount(filepath.Join(dir, "memory.events.local"), "oom_group_kill") +
			eventCount(filepath.Join(leaf, "memory.events"), "oom_kill")
	}
	return eventCount(filepath.Join(leaf, "memory.oom_control"), "oom_kill")
}

func (sc *sessionCgroup) deny(d *sandboxdv1.Denial) {
	if sc.onDenial == nil {
		return
	}
	d.Time = timestamppb.Now()
	sc.onDenial(d)
}

// hostHasSwap says whether any swap is configured (SwapTotal in
// /proc/meminfo); when unsure, that there is.
func hostHasSwap() bool {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SwapTotal:"); ok {
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")) != "0"
		}
	}
	return true
}

// eventCount reads one "key value" line of a cgroup events file; 0 when
// there is none.
func eventCount(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// killAll kills every process in the session's cgroups: what a sandbox
// without a pid namespace forked is there even when it left the init's
// tree. One hierarchy is enough, as every process is in each.
func (sc *sessionCgroup) killAll() {
	c := ctlPids
	if sc.dirs[c] == "" {
		for c = range sc.dirs {
			break
		}
	}
	dir := sc.dirs[c]
	if sc.v2[c] && writeCgroupFile(dir, "cgroup.kill", "1") == nil {
		return
	}
	// Without cgroup.kill: a process may fork while the list is read, so
	// read again until it is empty.
	for range 100 {
		pids := cgroupPids(dir)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// cgroupPids lists the processes in dir and beneath it.
func cgroupPids(dir string) []int {
	var pids []int
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids
}

// end stops the watchers, says whether the memory limit killed the
// session, and removes the cgroups. Every process of the sandbox is gone.
func (sc *sessionCgroup) end() (oomKilled bool) {
	sc.ended.Do(func() { sc.oomEnd = sc.remove() })
	return sc.oomEnd
}

func (sc *sessionCgroup) remove() (oomKilled bool) {
	close(sc.stop)
	sc.stopped.Wait()
	sc.mu.Lock()
	oom := sc.oom
	sc.mu.Unlock()
	if !oom && sc.limits.GetMemoryBytes() != 0 {
		oom = sc.oomKills() > 0
	}
	sc.owner.mu.Lock()
	delete(sc.owner.sessions, sc.id)
	sc.owner.mu.Unlock()
	sc.owner.mu.Lock()
	bases := sc.owner.bases
	sc.owner.mu.Unlock()
	seen := map[string]bool{}
	for c, dir := range sc.dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		// The leaf may be busy while its last process exits. The
		// session's own directory stays while a child session is still
		// in it, and so does a parent's that ended first: the last to go
		// removes them, and live ones refuse (EBUSY).
		removeCgroupTree(filepath.Join(dir, cgroupLeaf))
		base := bases[sc.owner.host.ctl[c].mount]
		for p := dir; p != base && within(p, base); p = filepath.Dir(p) {
			if unix.Rmdir(p) != nil {
				break
			}
		}
	}
	return oom
}
