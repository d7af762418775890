package launcherlinux

import (
	"fmt"
	"slices"
	"strings"
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// MechanismSet is one complete way of enforcing a policy on Linux. Every set
// enforces every field it accepts fully; they differ in what the host must
// offer and in which policies they accept at all.
type MechanismSet string

const (
	// SetNamespaces builds the sandbox in new user, mount, pid, ipc, uts,
	// cgroup and (for network NONE) net namespaces, with Landlock as a
	// second filesystem layer and seccomp.
	SetNamespaces MechanismSet = "namespaces"
	// SetLandlock uses no namespace at all: Landlock confines the
	// filesystem, signals and ptrace, seccomp takes sockets and the
	// syscalls a namespace would have fenced off. It is what a host that
	// forbids user namespaces can still offer.
	SetLandlock MechanismSet = "landlock"
)

// MechanismSets are in order of preference: the first that can enforce a
// policy is the one used.
var MechanismSets = []MechanismSet{SetNamespaces, SetLandlock}

// ParseMechanismSet checks a set name from the command line; "" is
// automatic choice.
func ParseMechanismSet(s string) (MechanismSet, error) {
	if s == "" {
		return "", nil
	}
	for _, m := range MechanismSets {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown mechanism set %q (want %s or %s)", s, SetNamespaces, SetLandlock)
}

func (s MechanismSet) description() string {
	switch s {
	case SetNamespaces:
		return "user, mount, pid, ipc, uts, cgroup and net namespaces; Landlock and seccomp as further layers"
	case SetLandlock:
		return "no namespaces: Landlock for files, signals and ptrace; seccomp for sockets, IPC and kernel interfaces"
	}
	return string(s)
}

// landlockSetABI is the least Landlock ABI the landlock set accepts: 3 is
// the first that handles truncate, 6 the first that scopes signals and
// abstract unix sockets to the sandbox, which a pid namespace does in the
// other set.
const (
	landlockFSABI    = 3
	landlockScopeABI = 6
)

// shortfall is why one mechanism set cannot enforce one field.
type shortfall struct {
	field, mechanism, found, probe, remedy string
	errno                                  syscall.Errno
	// byPolicy is set when the policy, not the host, is what the set
	// cannot do: changing the policy is then a remedy.
	byPolicy bool
}

// need is one primitive a set needs for one field.
type need struct {
	field, mechanism, prim, remedy string
	byPolicy                       bool
}

const (
	remedyMounts  = "allow mounts in a new user namespace (a container's seccomp or LSM profile may forbid them), or run sandboxd as root on the host"
	remedyNetNone = "allow bringing up loopback in a new network namespace, or drop network NONE from the policy (use network HOST)"
	remedySeccomp = "allow seccomp filters for the daemon (a container runtime or an outer sandbox may forbid them)"
	remedyNotify  = "allow seccomp user notification, pidfd_open, pidfd_getfd and process_vm_readv for the daemon (a container runtime's seccomp profile may forbid them), or use network HOST, or set children.allow to false"
)

func remedyUserNS(root bool) string {
	if root {
		return "allow user namespaces (sysctl user.max_user_namespaces>0; a container's seccomp profile or an outer sandbox may deny clone(CLONE_NEWUSER))"
	}
	return "run sandboxd as root, or allow unprivileged user namespaces (sysctl user.max_user_namespaces>0, kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0)"
}

func remedyIDMap(root bool) string {
	if root {
		return "map the sandbox identity in the daemon's user namespace (a subuid/subgid range covering --sandbox-uid/--sandbox-gid, with CAP_SETUID and CAP_SETGID), or start sandboxd with a --sandbox-uid that is mapped"
	}
	return "grant CAP_SETUID or a subuid range, or run sandboxd as root"
}

// needs lists what s needs from the host for p; children says the session
// gets a socket of its own.
func (s MechanismSet) needs(p *sandboxdv1.Policy, h *HostProbe, children bool) ([]need, *shortfall) {
	fs := p.GetFilesystem()
	fsField := "filesystem.read"
	if len(fs.GetWrite()) > 0 {
		fsField = "filesystem.write"
	}
	none := p.GetNetwork().GetMode() != sandboxdv1.Network_HOST
	// Room for the most a set lists with every limit: the list was grown
	// four times over at each launch.
	ns := make([]need, 0, 16)
	root := h.EUID == 0
	switch s {
	case SetNamespaces:
		mnt := "a read-only mount namespace in a user namespace"
		ns = append(ns,
			need{field: fsField, mechanism: mnt, prim: PrimUserNS, remedy: remedyUserNS(root)},
			need{field: fsField, mechanism: mnt, prim: PrimIDMap, remedy: remedyIDMap(h.EUID == 0)},
			need{field: fsField, mechanism: mnt, prim: PrimMountNS, remedy: remedyMounts},
			need{field: fsField, mechanism: mnt, prim: PrimMounts, remedy: remedyMounts},
		)
		for _, prim := range []string{PrimPIDNS, PrimIPCNS, PrimUTSNS, PrimCgroupNS} {
			ns = append(ns, need{field: "process", mechanism: "pid, ipc, uts and cgroup namespaces", prim: prim, remedy: remedyUserNS(root)})
		}
		if none {
			mech := "a network namespace with its own loopback, and seccomp for unix sockets"
			ns = append(ns,
				need{field: "network.mode", mechanism: mech, prim: PrimNetNS, remedy: remedyNetNone, byPolicy: true},
				need{field: "network.mode", mechanism: mech, prim: PrimLoopback, remedy: remedyNetNone, byPolicy: true},
				need{field: "network.mode", mechanism: mech, prim: PrimSeccomp, remedy: remedySeccomp + ", or drop network NONE from the policy", byPolicy: true},
			)
			if children {
				ns = append(ns, need{field: "children.allow", mechanism: "seccomp user notification, so that the daemon performs the sandbox's connect() to its session socket from the private network namespace", prim: PrimSeccompNotify, remedy: remedyNotify, byPolicy: true})
			}
		}
	case SetLandlock:
		if h.LandlockABI < landlockFSABI {
			return nil, &shortfall{
				field: fsField, mechanism: fmt.Sprintf("landlock ABI %d or later", landlockFSABI),
				found: landlockFound(h), probe: h.Get(PrimLandlock).Op, errno: h.Get(PrimLandlock).Errno,
				remedy: "enable Landlock (CONFIG_SECURITY_LANDLOCK=y, landlock in the lsm= boot list) on Linux 5.19 or later",
			}
		}
		if h.LandlockABI < landlockScopeABI {
			return nil, &shortfall{
				field: "process", mechanism: fmt.Sprintf("landlock ABI %d (signal and abstract unix socket scoping) in place of a pid namespace", landlockScopeABI),
				found: landlockFound(h), probe: h.Get(PrimLandlock).Op,
				remedy: "run on Linux 6.12 or later, or allow user namespaces so the namespaces set can be used",
			}
		}
		ns = append(ns, need{field: "process", mechanism: "seccomp (sockets, SysV IPC, namespaces, kernel interfaces)", prim: PrimSeccomp, remedy: remedySeccomp})
		ns = append(ns, need{field: "filesystem.write", mechanism: "seccomp user notification, so that the daemon performs chmod, chown, utimes, xattr and inode-flag calls only inside the write roots (Landlock governs none of them)", prim: PrimSeccompNotify, remedy: remedyNotify})
		if h.EUID == 0 {
			ns = append(ns, need{field: "process", mechanism: "setuid to the sandbox identity", prim: PrimSwitchID, remedy: remedyIDMap(true)})
		}
	}
	for _, c := range limitControllers(p.GetLimits()) {
		ns = append(ns, need{field: limitField(c), mechanism: "the cgroup " + c + " controller", prim: cgroupPrim(c), remedy: remedyCgroup, byPolicy: true})
	}
	return ns, nil
}

func landlockFound(h *HostProbe) string {
	if h.LandlockABI == 0 {
		return "no Landlock"
	}
	return fmt.Sprintf("landlock ABI %d", h.LandlockABI)
}

// landlockPolicyShortfall is what Landlock cannot express whatever the
// host: rules only add rights, so nothing beneath a write root can be made
// read-only or unreadable again, and without a mount namespace a write root
// over /dev or /proc would be the host's.
func landlockPolicyShortfall(fs *sandboxdv1.Filesystem) *shortfall {
	writes := fs.GetWrite()
	for _, c := range fs.GetReadOnly() {
		if coveredBy(c, writes) {
			return &shortfall{
				field: "filesystem.read_only", byPolicy: true,
				mechanism: "a mount namespace (read-only rebind inside a write root)",
				found:     fmt.Sprintf("landlock cannot take write access to %s away beneath write root %s", c, innermostRoot(c, writes)),
				remedy:    "allow user namespaces so the namespaces set can be used, or drop the read-only carve-out",
			}
		}
	}
	for _, d := range fs.GetDeny() {
		if coveredBy(d, writes) {
			return &shortfall{
				field: "filesystem.deny", byPolicy: true,
				mechanism: "a mount namespace (mask inside a write root)",
				found:     fmt.Sprintf("landlock cannot take access to %s away beneath write root %s", d, innermostRoot(d, writes)),
				remedy:    "allow user namespaces so the namespaces set can be used, or move the deny path out of the write roots",
			}
		}
	}
	for _, w := range writes {
		for _, sys := range []string{"/dev", "/proc"} {
			if within(sys, w) {
				return &shortfall{
					field: "filesystem.write", byPolicy: true,
					mechanism: "a mount namespace (private " + sys + " beneath a write root)",
					found:     fmt.Sprintf("without one, write root %s would open the host's %s", w, sys),
					remedy:    "allow user namespaces so the namespaces set can be used, or name narrower write roots",
				}
			}
		}
	}
	return nil
}

// childrenShortfall is why the landlock set cannot give a session its own
// socket: without a mount namespace the socket cannot appear at a fixed
// path, and nothing would hide the daemon's main socket and the other
// sessions' sockets, which the sandbox could then connect to.
var childrenShortfall = &shortfall{
	field: "children.allow", byPolicy: true,
	mechanism: "a mount namespace (the session socket at " + SessionSocketPath + ", the daemon's other sockets masked)",
	found:     "the landlock set has no mount namespace",
	remedy:    "allow user namespaces so the namespaces set can be used, or set children.allow to false",
}

// allowlistShortfall is why the landlock set cannot confine a sandbox to
// the daemon's proxy: without a network namespace the sandbox shares the
// host's, and neither Landlock nor seccomp can tell the proxy's address
// from any other.
var allowlistShortfall = &shortfall{
	field: "network.mode", byPolicy: true,
	mechanism: "a network namespace whose only way out is the daemon's proxy",
	found:     "the landlock set has no network namespace",
	remedy:    "allow user namespaces so the namespaces set can be used, or use network NONE or HOST",
}

// check returns why s cannot enforce p on host h, nil if it can; children
// says the session gets a socket of its own. The host comes before the
// policy: a policy change is no remedy where the set cannot run at all.
func (s MechanismSet) check(p *sandboxdv1.Policy, h *HostProbe, children bool) *shortfall {
	ns, sf := s.needs(p, h, children)
	if sf != nil {
		return sf
	}
	for _, n := range ns {
		r := h.Get(n.prim)
		if r.OK {
			continue
		}
		found := n.prim + " does not work"
		if r.Detail != "" {
			found += ": " + r.Detail
		}
		return &shortfall{field: n.field, mechanism: n.mechanism, found: found, probe: r.Op, errno: r.Errno, remedy: n.remedy, byPolicy: n.byPolicy}
	}
	if s == SetLandlock {
		if sf := landlockPolicyShortfall(p.GetFilesystem()); sf != nil {
			return sf
		}
		if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST {
			return allowlistShortfall
		}
		if children {
			return childrenShortfall
		}
	}
	return nil
}

// Choose picks the first mechanism set (or the forced one) that enforces
// every field of p on host h. When none does, the refusal names the field
// and, for each set, what it lacks.
func Choose(p *sandboxdv1.Policy, h *HostProbe, forced MechanismSet) (MechanismSet, error) {
	return choose(p, h, forced, p.GetChildren().GetAllow())
}

// choose is Choose for a session that gets a socket of its own when
// children is set, whatever the policy says: what the daemon made is what
// the sandbox must be given, and hidden from everyone else.
func choose(p *sandboxdv1.Policy, h *HostProbe, forced MechanismSet, children bool) (MechanismSet, error) {
	if err := refuseUnsupported(p); err != nil {
		return "", err
	}
	sets := MechanismSets
	if forced != "" {
		sets = []MechanismSet{forced}
	}
	var shorts []*shortfall
	for _, s := range sets {
		sf := s.check(p, h, children)
		if sf == nil {
			return s, nil
		}
		shorts = append(shorts, sf)
	}
	return "", refusal(sets, shorts)
}

// refusal merges the sets' shortfalls into one answer. A shortfall the
// policy could avoid is named first: dropping a field is a remedy the caller
// has, changing the host usually is not.
func refusal(sets []MechanismSet, shorts []*shortfall) *launcher.Unenforceable {
	order := make([]int, len(shorts))
	for i := range order {
		order[i] = i
	}
	if len(shorts) > 1 && !shorts[0].byPolicy && shorts[1].byPolicy {
		order[0], order[1] = 1, 0
	}
	first := shorts[order[0]]
	u := &launcher.Unenforceable{Field: first.field}
	// The probe that failed, from the first shortfall that has one: a
	// policy Landlock cannot express has none of its own.
	for _, i := range order {
		if shorts[i].probe != "" {
			u.Probe, u.Errno = shorts[i].probe, shorts[i].errno
			break
		}
	}
	var mech, found, remedy []string
	for _, i := range order {
		sf, set := shorts[i], sets[i]
		label := string(set) + " set"
		if sf.field != first.field {
			label += ", for " + sf.field
		}
		mech = append(mech, fmt.Sprintf("%s (%s)", sf.mechanism, label))
		found = append(found, fmt.Sprintf("%s (%s)", sf.found, label))
		if !slices.Contains(remedy, sf.remedy) {
			remedy = append(remedy, sf.remedy)
		}
	}
	u.Mechanism = strings.Join(mech, ", or ")
	u.Found = strings.Join(found, "; ")
	u.Remedy = strings.Join(remedy, "; or ")
	return u
}
